-- Operators' lists and counts at scale (issue 28): every list is newest
-- first by default and paged by saga id (ids begin with their creation
-- time), and each filter starts in an index of its own
-- (orchestrator/store/saga_list.hpp), so a page costs the same whatever
-- the store holds.
DROP INDEX saga_by_state;
CREATE INDEX saga_by_state ON saga (tenant, state, saga_id);
CREATE INDEX saga_by_tenant ON saga (tenant, saga_id);
CREATE INDEX saga_by_type ON saga (tenant, type, saga_id);
-- A credit's, deduction's or refund's account, or a transfer's source; and
-- a transfer's destination.
CREATE INDEX saga_by_account ON saga (tenant, (coalesce(input->>'account', input->>'source')), saga_id);
CREATE INDEX saga_by_destination ON saga (tenant, (input->>'destination'), saga_id) WHERE type = 'transfer';

-- How many sagas each tenant has in each state, kept by the statements
-- that write sagas instead of counted by a scan. Each writing session adds
-- to rows of its own (slot = its backend pid), so concurrent transactions
-- never wait for one another's counts, and two sessions can never lock the
-- same rows in a different order; the rows of sessions that ended are
-- folded into slot 0 by the orchestrator's maintenance. A count is the sum
-- over slots.
CREATE TABLE saga_state_count (
  tenant text COLLATE "C" NOT NULL,
  state text NOT NULL,
  slot int NOT NULL,
  sagas bigint NOT NULL,
  PRIMARY KEY (tenant, state, slot)
);
INSERT INTO saga_state_count (tenant, state, slot, sagas) SELECT tenant, state, 0, count(*) FROM saga GROUP BY 1, 2;

-- Statement triggers, so a round of writes (one statement for many sagas)
-- costs one call and one row per tenant and state it changed.
CREATE FUNCTION saga_state_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO saga_state_count AS c (tenant, state, slot, sagas)
  SELECT tenant, state, pg_backend_pid(), count(*) FROM new_sagas GROUP BY tenant, state ORDER BY tenant, state
  ON CONFLICT (tenant, state, slot) DO UPDATE SET sagas = c.sagas + EXCLUDED.sagas;
  RETURN NULL;
END
$$;
CREATE FUNCTION saga_state_count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO saga_state_count AS c (tenant, state, slot, sagas)
  SELECT tenant, state, pg_backend_pid(), sum(change) FROM (
    SELECT o.tenant, o.state, -1 AS change FROM old_sagas o JOIN new_sagas n USING (saga_id) WHERE o.state <> n.state
    UNION ALL
    SELECT n.tenant, n.state, 1 FROM old_sagas o JOIN new_sagas n USING (saga_id) WHERE o.state <> n.state) moved
  GROUP BY tenant, state ORDER BY tenant, state
  ON CONFLICT (tenant, state, slot) DO UPDATE SET sagas = c.sagas + EXCLUDED.sagas;
  RETURN NULL;
END
$$;
CREATE TRIGGER saga_state_count_inserted AFTER INSERT ON saga REFERENCING NEW TABLE AS new_sagas
  FOR EACH STATEMENT EXECUTE FUNCTION saga_state_count_inserted();
CREATE TRIGGER saga_state_count_updated AFTER UPDATE ON saga REFERENCING OLD TABLE AS old_sagas NEW TABLE AS new_sagas
  FOR EACH STATEMENT EXECUTE FUNCTION saga_state_count_updated();
