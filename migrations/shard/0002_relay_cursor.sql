-- How far each relay consumer (one per sink) has delivered this database's
-- outbox, in commit order: (tx_id, id) of the last event it delivered.
CREATE TABLE relay_cursor (
  consumer text COLLATE "C" PRIMARY KEY,
  tx_id xid8 NOT NULL,
  id bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
