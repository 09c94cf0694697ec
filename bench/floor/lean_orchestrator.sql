-- LEAN=1: the saga store without its by-state index (operator listings)
-- and its per-saga event version index, and with json payloads.
DROP INDEX saga_by_state;
ALTER TABLE outbox_event DROP CONSTRAINT outbox_event_saga_id_saga_version_key;
ALTER TABLE outbox_event ALTER payload TYPE json;
ALTER TABLE saga ALTER input TYPE json;
