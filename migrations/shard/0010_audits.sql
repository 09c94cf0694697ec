-- Full audits (POST /v1/audits): a reconciliation of every account of a
-- scope (a tenant, or every tenant when NULL) run in the background by the
-- shard's writer, a page of accounts at a time, each page in a snapshot of
-- its own, so that none holds one over the whole history. A page commits
-- its counts, findings and cursor (the last account it checked) with the
-- checkpoints it leaves, so a writer that restarts resumes every running
-- audit after its cursor, checking no account twice. Cancel stops an audit
-- between pages.
CREATE TABLE audit_run (
  audit_id bigserial PRIMARY KEY,
  tenant text COLLATE "C",
  state text NOT NULL CHECK (state IN ('running', 'completed', 'cancelled')),
  freezes boolean NOT NULL,  -- freezes the accounts that differ
  accounts_total bigint NOT NULL CHECK (accounts_total >= 0),  -- the scope's accounts when it started
  accounts_checked bigint NOT NULL DEFAULT 0 CHECK (accounts_checked >= 0),
  differences bigint NOT NULL DEFAULT 0 CHECK (differences >= 0),
  classes jsonb NOT NULL DEFAULT '{}',
  -- The reports of the accounts that differ, the first 1,000 of them.
  findings jsonb NOT NULL DEFAULT '[]',
  frozen jsonb NOT NULL DEFAULT '[]',
  cursor_tenant text COLLATE "C",
  cursor_account text COLLATE "C",
  started_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX audit_run_by_tenant ON audit_run (tenant, audit_id);
CREATE INDEX audit_run_running ON audit_run (audit_id) WHERE state = 'running';
