-- The saga store. One row per saga: what was asked (input, request hash),
-- where it stands (state, and the engine's progress of every call as JSON),
-- when the engine must look at it again (wake_at), and which instance holds
-- it (a lease, valid while that instance's heartbeat in
-- orchestrator_instance is fresh). Every attempt of every call is kept in saga_step; every
-- state change is an outbox event in the same transaction.
--
-- Identifiers are COLLATE "C", as on the shards.

CREATE TABLE saga (
  saga_id text COLLATE "C" PRIMARY KEY,
  tenant text COLLATE "C" NOT NULL,
  type text NOT NULL CHECK (type IN ('credit', 'deduct', 'refund', 'transfer', 'batch_deduct')),
  biz_id text COLLATE "C" NOT NULL,
  request_hash text NOT NULL,
  workflow text NOT NULL,
  input jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'running', 'awaiting_confirmation', 'compensating',
                                       'completed', 'failed', 'compensated', 'needs_attention')),
  -- Written by every save and read back whole: json (kept as text) costs
  -- less to write than jsonb.
  progress json NOT NULL,
  error_code text,
  error_message text,
  attention text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  deadline timestamptz NOT NULL,
  -- NULL when nothing but an outside event (the app, an operator) can move it.
  wake_at timestamptz,
  lease_owner text COLLATE "C",
  -- Bumped by every write; a write names the version it read.
  version bigint NOT NULL CHECK (version >= 1),
  -- Saga idempotency: one saga per (tenant, type, biz_id) forever. In this
  -- order the index also finds a tenant's sagas by biz_id of any type.
  UNIQUE (tenant, biz_id, type),
  -- A finished saga waits for nothing and nobody holds it.
  CHECK (state NOT IN ('completed', 'failed', 'compensated') OR (wake_at IS NULL AND lease_owner IS NULL))
);
CREATE INDEX saga_due ON saga (wake_at) WHERE wake_at IS NOT NULL;

-- One row per orchestrator instance: its leases hold while alive_until is
-- in the future, so renewing every lease is one row's update (never a lock
-- on the sagas being written).
CREATE TABLE orchestrator_instance (
  instance text COLLATE "C" PRIMARY KEY,
  alive_until timestamptz NOT NULL
);
CREATE INDEX saga_by_state ON saga (tenant, state, created_at);

-- Every attempt of every call (step, item, forward or undo).
CREATE TABLE saga_step (
  saga_id text COLLATE "C" NOT NULL REFERENCES saga (saga_id),
  step text NOT NULL,
  item int NOT NULL,
  undo boolean NOT NULL,
  attempt int NOT NULL CHECK (attempt >= 1),
  shard text NOT NULL,
  command json NOT NULL,
  sent_at timestamptz NOT NULL,
  outcome text,
  code text,
  answered_at timestamptz,
  PRIMARY KEY (saga_id, step, item, undo, attempt)
);

-- Transactional outbox of saga state changes; tx_id lets the relay read in
-- commit-safe order.
CREATE TABLE outbox_event (
  id bigserial PRIMARY KEY,
  -- Random, so unique without an index (consumers dedupe by it).
  event_id uuid NOT NULL DEFAULT gen_random_uuid(),
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  tenant text COLLATE "C" NOT NULL,
  saga_id text COLLATE "C" NOT NULL,
  saga_version bigint NOT NULL,
  event_type text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (saga_id, saga_version)
);
CREATE INDEX outbox_event_tx ON outbox_event (tx_id, id);

-- Confirm, cancel, abort and retry requests for sagas that another instance
-- may hold: the holder takes them (or whoever claims the saga next).
CREATE TABLE saga_action (
  id bigserial PRIMARY KEY,
  saga_id text COLLATE "C" NOT NULL REFERENCES saga (saga_id),
  action text NOT NULL CHECK (action IN ('confirm', 'cancel', 'abort', 'retry')),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'taken', 'finished')),
  result text,
  requested_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX saga_action_pending ON saga_action (saga_id) WHERE status = 'pending';
