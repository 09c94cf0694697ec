-- LEAN=1: the shard schema without what the floor could do without: the
-- ledger's second one-effect-per-key index and jsonb payloads (json is
-- stored as text). The outbox's per-account version index is gone from the
-- migrations themselves (0004).
DROP INDEX ledger_entry_key;
ALTER TABLE outbox_event ALTER payload TYPE json;
