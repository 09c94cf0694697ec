-- Incremental reconciliation (GET /v1/reconciliation, mode=incremental):
-- per account, where its last clean check ended: its last ledger entry
-- then (seq) and the sum of its entries up to it (balance). The next run
-- adds only the entries after seq. clean is false while the account
-- differed at its last check (seq and balance stay those of the last clean
-- one): every run checks it again until it agrees.
CREATE TABLE account_checkpoint (
  tenant text COLLATE "C" NOT NULL,
  account_id text COLLATE "C" NOT NULL,
  seq bigint NOT NULL CHECK (seq >= 0),
  balance bigint NOT NULL,
  clean boolean NOT NULL,
  checked_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, account_id)
);
CREATE INDEX account_checkpoint_differing ON account_checkpoint (tenant, account_id) WHERE NOT clean;

-- A run checks every account (full) or those written since the last run
-- of its scope (incremental: entries after `since`, open holds, accounts
-- that differed).
ALTER TABLE reconciliation_run
  ADD COLUMN mode text NOT NULL DEFAULT 'full' CHECK (mode IN ('full', 'incremental')),
  ADD COLUMN since bigint;
