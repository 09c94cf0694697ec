-- The counts by state are kept by the statements that write sagas
-- (orchestrator/store/saga_store.cpp: the insert adds its new sagas, the
-- save moves the ones whose state it changed, each to its session's slot)
-- instead of by statement triggers: a trigger with transition tables
-- doubled the cost of a save (0.36 -> 0.69 ms per saga in bench-compare).
-- Only the store writes sagas.
DROP TRIGGER saga_state_count_inserted ON saga;
DROP TRIGGER saga_state_count_updated ON saga;
DROP FUNCTION saga_state_count_inserted();
DROP FUNCTION saga_state_count_updated();

-- An event's payload is the API's saga object, written once and read back
-- as text: json keeps the text (about 14 % smaller than jsonb for a
-- transfer's document, and neither parsed into jsonb nor printed back).
ALTER TABLE outbox_event ALTER COLUMN payload TYPE json;
