-- Every reconciliation an operator runs (GET /v1/reconciliation), kept so
-- that the console and tallyctl can show the last reports. tenant is NULL
-- for a run over every tenant.
CREATE TABLE reconciliation_run (
  run_id bigserial PRIMARY KEY,
  tenant text COLLATE "C",
  ran_at timestamptz NOT NULL DEFAULT now(),
  watermark bigint NOT NULL,
  differences int NOT NULL,
  classes jsonb NOT NULL,
  frozen jsonb NOT NULL,
  report jsonb NOT NULL
);
CREATE INDEX reconciliation_run_by_tenant ON reconciliation_run (tenant, run_id);

-- Operators list the accounts that are not active (frozen by a
-- reconciliation, or closed) without reading the active ones.
CREATE INDEX account_not_active ON account (tenant, status, account_id) WHERE status <> 'active';
