-- LEAN=1: the shard schema without what the floor could do without: the
-- ledger's second one-effect-per-key index, the outbox's per-account version
-- index, and jsonb payloads (json is stored as text).
DROP INDEX ledger_entry_key;
ALTER TABLE outbox_event DROP CONSTRAINT outbox_event_tenant_account_id_aggregate_version_key;
ALTER TABLE outbox_event ALTER payload TYPE json;
