-- An attempt row is only ever written by the statement that writes its
-- saga, joined to the saga rows that statement wrote (orchestrator/store),
-- so it cannot exist without its saga. The foreign key's check, a query
-- per attempt row, cost more than the rest of the insert.
ALTER TABLE saga_step DROP CONSTRAINT saga_step_saga_id_fkey;
