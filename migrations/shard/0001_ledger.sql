-- The ledger of one shard. Every state change happens in a transaction that
-- also writes its operation record, ledger entry (when the balance moves)
-- and outbox event.

-- Which process may write: bumped by each new writer; every write
-- transaction checks it (FOR SHARE), so an old writer is fenced out.
CREATE TABLE shard_writer (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  epoch bigint NOT NULL,
  holder text NOT NULL,
  since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO shard_writer (epoch, holder) VALUES (0, 'none');

CREATE TABLE account (
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  balance bigint NOT NULL CHECK (balance >= 0),
  held bigint NOT NULL CHECK (held >= 0),
  status text NOT NULL CHECK (status IN ('active', 'frozen', 'closed')),
  version bigint NOT NULL CHECK (version >= 1),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account_id),
  CONSTRAINT available_not_negative CHECK (balance - held >= 0)
);

-- The idempotency record: one row per business key, holding its first
-- terminal outcome (or a cancel_key tombstone).
CREATE TABLE operation (
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  biz_type text COLLATE "C" NOT NULL,
  biz_id text COLLATE "C" NOT NULL,
  request_hash text NOT NULL,
  state text NOT NULL CHECK (state IN ('succeeded', 'rejected', 'cancelled')),
  amount bigint NOT NULL CHECK (amount >= 0),
  reason text,
  balance_after bigint NOT NULL,
  held_after bigint NOT NULL,
  version_after bigint NOT NULL,
  ledger_seq bigint,
  refunded bigint NOT NULL DEFAULT 0 CHECK (refunded >= 0 AND refunded <= amount),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account_id, biz_type, biz_id)
);

CREATE SEQUENCE ledger_seq;

CREATE TABLE ledger_entry (
  seq bigint PRIMARY KEY,
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  biz_type text COLLATE "C" NOT NULL,
  biz_id text COLLATE "C" NOT NULL,
  delta bigint NOT NULL,
  balance_after bigint NOT NULL CHECK (balance_after >= 0),
  reverses bigint REFERENCES ledger_entry (seq),
  created_at timestamptz NOT NULL DEFAULT now()
);
-- One effect per business key, enforced a second time here.
CREATE UNIQUE INDEX ledger_entry_key ON ledger_entry (tenant, account_id, biz_type, biz_id);
CREATE INDEX ledger_entry_account ON ledger_entry (tenant, account_id, seq);

CREATE FUNCTION ledger_entry_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entry is append-only: correct with a reversing entry';
END
$$;
CREATE TRIGGER ledger_entry_append_only BEFORE UPDATE OR DELETE ON ledger_entry
  FOR EACH ROW EXECUTE FUNCTION ledger_entry_append_only();

CREATE TABLE hold (
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  hold_id text COLLATE "C" NOT NULL,
  amount bigint NOT NULL CHECK (amount >= 0),
  captured bigint NOT NULL DEFAULT 0 CHECK (captured >= 0 AND captured <= amount),
  state text NOT NULL CHECK (state IN ('held', 'captured', 'released')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account_id, hold_id)
);
CREATE INDEX hold_open ON hold (created_at) WHERE state = 'held';

-- Transactional outbox. tx_id lets the relay read in commit-safe order.
CREATE TABLE outbox_event (
  id bigserial PRIMARY KEY,
  -- Random, so unique without an index (consumers dedupe by it).
  event_id uuid NOT NULL DEFAULT gen_random_uuid(),
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  aggregate_version bigint NOT NULL,
  event_type text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant, account_id, aggregate_version)
);
CREATE INDEX outbox_event_tx ON outbox_event (tx_id, id);
