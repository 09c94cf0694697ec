-- The rows one batch of :n debits must write on a shard (DESIGN.md,
-- migrations/shard): each debit's account update, operation record, ledger
-- entry and outbox event; no lookups, no locks, no fence. The values are
-- generated here; debit_values.sql is the same generation without the
-- writes, subtracted by scripts/bench-floor.
\set n 50
SELECT nextval('floor_batch') AS b \gset
BEGIN;
UPDATE account a SET balance = a.balance - 1, version = a.version + 1, updated_at = now()
  FROM (SELECT 'acc-' || ((:b * :n + g * 7919) % 10000) AS account_id FROM generate_series(1, :n) g) k
  WHERE a.tenant = 'bench' AND a.account_id = k.account_id;
INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, balance_after,
                       held_after, version_after, ledger_seq, refunded)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'debit', 'd-' || :b || '-' || g,
         md5(:b || '-' || g) || md5(g || '-' || :b), 'succeeded', 1, NULL, 999999, 0, 2, :b * :n + g, 0
  FROM generate_series(1, :n) g;
INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses)
  SELECT :b * :n + g, 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'debit', 'd-' || :b || '-' || g, -1,
         999999, NULL
  FROM generate_series(1, :n) g;
INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), :b * :n + g, 'account.debited',
         ('{"tenant":"bench","account_id":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","balance":999999999,"held":0,"available":999999999,"status":"active","version":' || (:b * :n + g)
          || ',"cause":{"type":"debit","biz_id":"d-' || :b || '-' || g || '"}}')::json
  FROM generate_series(1, :n) g;
COMMIT;
