-- The rows one batch of :n cross-shard transfers must write on the shards,
-- as three transactions (the saga's three steps): hold the source (account,
-- operation, hold, outbox event), credit the destination (account,
-- operation, ledger entry, outbox event), capture the source (account,
-- operation, hold, ledger entry, outbox event). Sources are acc-0…9999,
-- destinations acc-10000…19999. No lookups, no locks, no fence.
\set n 50
SELECT nextval('floor_batch') AS b \gset
BEGIN;
UPDATE account a SET held = a.held + 1, version = a.version + 1, updated_at = now()
  FROM (SELECT 'acc-' || ((:b * :n + g * 7919) % 10000) AS account_id FROM generate_series(1, :n) g) k
  WHERE a.tenant = 'bench' AND a.account_id = k.account_id;
INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, balance_after,
                       held_after, version_after, ledger_seq, refunded)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'hold', 'sg-' || :b || '-' || g || ':hold',
         md5(:b || '-' || g) || md5(g || '-' || :b), 'succeeded', 1, NULL, 999999, 1, 2, NULL, 0
  FROM generate_series(1, :n) g;
INSERT INTO hold (tenant, account_id, hold_id, amount, captured, state)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'sg-' || :b || '-' || g || ':hold', 1, 0, 'held'
  FROM generate_series(1, :n) g;
INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), :b * :n + g, 'account.held',
         ('{"tenant":"bench","account_id":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","balance":999999999,"held":1,"available":999999998,"status":"active","version":' || (:b * :n + g)
          || ',"cause":{"type":"hold","biz_id":"sg-' || :b || '-' || g || ':hold"}}')::json
  FROM generate_series(1, :n) g;
COMMIT;
BEGIN;
UPDATE account a SET balance = a.balance + 1, version = a.version + 1, updated_at = now()
  FROM (SELECT 'acc-' || (10000 + (:b * :n + g * 7907) % 10000) AS account_id FROM generate_series(1, :n) g) k
  WHERE a.tenant = 'bench' AND a.account_id = k.account_id;
INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, balance_after,
                       held_after, version_after, ledger_seq, refunded)
  SELECT 'bench', 'acc-' || (10000 + (:b * :n + g * 7907) % 10000), 'credit', 'sg-' || :b || '-' || g || ':credit',
         md5(:b || '-' || g) || md5(g || '-' || :b), 'succeeded', 1, NULL, 999999, 0, 2, 2 * (:b * :n + g), 0
  FROM generate_series(1, :n) g;
INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses)
  SELECT 2 * (:b * :n + g), 'bench', 'acc-' || (10000 + (:b * :n + g * 7907) % 10000), 'credit',
         'sg-' || :b || '-' || g || ':credit', 1, 999999, NULL
  FROM generate_series(1, :n) g;
INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload)
  SELECT 'bench', 'acc-' || (10000 + (:b * :n + g * 7907) % 10000), :b * :n + g, 'account.credited',
         ('{"tenant":"bench","account_id":"acc-' || (10000 + (:b * :n + g * 7907) % 10000)
          || '","balance":999999999,"held":0,"available":999999999,"status":"active","version":' || (:b * :n + g)
          || ',"cause":{"type":"credit","biz_id":"sg-' || :b || '-' || g || ':credit"}}')::json
  FROM generate_series(1, :n) g;
COMMIT;
BEGIN;
UPDATE account a SET balance = a.balance - 1, held = a.held - 1, version = a.version + 1, updated_at = now()
  FROM (SELECT 'acc-' || ((:b * :n + g * 7919) % 10000) AS account_id FROM generate_series(1, :n) g) k
  WHERE a.tenant = 'bench' AND a.account_id = k.account_id;
INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, balance_after,
                       held_after, version_after, ledger_seq, refunded)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'capture', 'sg-' || :b || '-' || g || ':capture',
         md5(:b || '-' || g) || md5(g || '-' || :b), 'succeeded', 1, NULL, 999998, 0, 3, 2 * (:b * :n + g) + 1, 0
  FROM generate_series(1, :n) g;
UPDATE hold h SET captured = 1, state = 'captured', updated_at = now()
  FROM (SELECT 'acc-' || ((:b * :n + g * 7919) % 10000) AS account_id, 'sg-' || :b || '-' || g || ':hold' AS hold_id
        FROM generate_series(1, :n) g) k
  WHERE h.tenant = 'bench' AND h.account_id = k.account_id AND h.hold_id = k.hold_id;
INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses)
  SELECT 2 * (:b * :n + g) + 1, 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), 'capture',
         'sg-' || :b || '-' || g || ':capture', -1, 999998, NULL
  FROM generate_series(1, :n) g;
INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload)
  SELECT 'bench', 'acc-' || ((:b * :n + g * 7919) % 10000), :b * :n + g + 1000000000, 'account.captured',
         ('{"tenant":"bench","account_id":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","balance":999999998,"held":0,"available":999999998,"status":"active","version":' || (:b * :n + g)
          || ',"cause":{"type":"capture","biz_id":"sg-' || :b || '-' || g || ':capture"}}')::json
  FROM generate_series(1, :n) g;
COMMIT;
