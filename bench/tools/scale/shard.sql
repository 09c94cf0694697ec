-- One chunk of a shard's generated history: the accounts i0..i1-1 that
-- route to shard `shard`, with everything that happened to them, written
-- as account_shard writes it (store/batch.cpp, ledger/decide.cpp).
-- Variables (psql -v): N, S, R, t0, span, total (common.sql), shard, i0, i1.
--
-- Per account, in this order (so that every debit finds its value in lot 1):
--   round 0      open_account (the opening entry); a welcome credit of G on
--                lot 1 (never expires); for 10 % of accounts a credit of X
--                on lot 2 expiring at the start of round 1
--   round 1      lot 2 expired by the expiry job (entry and operation
--                "expire", biz_id 2)
--   rounds 1..R  its slot s = (m - 1) * N + i, when s < S: a transfer out
--                (hold, capture; the destination's credit adds to its lot 1),
--                a deduction (debit), a confirmed held deduction (hold,
--                capture), a deduction refunded in part (debit, refund), or a
--                transfer refused (hold rejected, insufficient_funds); and a
--                transfer in, from the account whose transfer of round m
--                lands here
--   round R + 1  for 30 %, a credit of E on a lot expiring 31 to 330 days
--                ahead; for 2 %, an open hold (a held deduction awaiting
--                confirmation) taken from that lot first, then lot 1
-- Lot 1 starts with a million units, far more than any account sends, so
-- it never runs out and stays open: balance, held, lots and operations
-- agree as reconciliation checks them (account_shard/store/queries.cpp).
\set ON_ERROR_STOP on
\ir common.sql
SET work_mem = '256MB';
-- A JIT compilation of these statements takes longer (seconds) than running them.
SET jit = off;

WITH acct AS MATERIALIZED (
  SELECT i, 'acc-' || i AS a, 1000000 + i % 1000 AS g, 100 + i % 50 AS x_amount, 200 + i % 100 AS e_amount,
         pg_temp.flag(i, 1, 10) AS x, pg_temp.flag(i, 2, 30) AS f, pg_temp.flag(i, 3, 2) AS oh,
         pg_temp.ms(((:R + 1)::bigint * :N + i) * 16, :t0, :span, :total) / 86400000 * 86400000
           + (31 + i % 300) * 86400000 AS f_expiry,
         pg_temp.ms((:N::bigint + i) * 16, :t0, :span, :total) AS x_expiry
  FROM generate_series(:i0::bigint, :i1::bigint - 1) i
  WHERE pg_temp.shard_of(i) = :shard),
-- Each account's own slots.
own AS MATERIALIZED (
  SELECT c.i, c.a, m, (m - 1) * :N + c.i AS s, pg_temp.kind((m - 1) * :N + c.i) AS kind, (m * :N + c.i) * 16 AS base
  FROM acct c CROSS JOIN generate_series(1::bigint, :R) m
  WHERE (m - 1) * :N + c.i < :S),
-- Transfers into each account: in round m, from (j - offset) mod N.
incoming AS MATERIALIZED (
  SELECT c.i, c.a, m, src, (m - 1) * :N + src AS s, (m * :N + src) * 16 AS base
  FROM acct c CROSS JOIN generate_series(1::bigint, :R) m
  CROSS JOIN LATERAL (SELECT ((c.i - pg_temp.offset_of(m, :N)) % :N + :N) % :N AS src) t
  WHERE (m - 1) * :N + src < :S AND pg_temp.kind((m - 1) * :N + src) = 'T'),
-- Every operation, with its entry's delta (NULL: no entry), what it adds
-- to held and to the account's version, its lot parts and the canonical
-- form of its command (ledger/command.cpp, request_hash). Saga ids are
-- made from the saga's creation position and its kind and number (codes
-- 1-9, as in sagas.sql).
ev AS MATERIALIZED (
  SELECT i, a, i * 16 AS pos, 'open_account' AS biz_type, 'open' AS biz_id, 0::bigint AS amount, 0::bigint AS delta,
         0::bigint AS d_held, 1 AS bump, 'succeeded' AS state, NULL AS reason, NULL AS lots, 0::bigint AS refunded,
         NULL::bigint AS reverses, NULL AS hold_state, 0::bigint AS lot1_in,
         pg_temp.canon('open_account') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon('open')
           || pg_temp.canon('0') || '0:;0:;0:;' AS canonical
  FROM acct
  UNION ALL
  SELECT i, a, pos, 'credit', sid, g, g, 0, 1, 'succeeded', NULL, format('[[1, %s, null, "1"]]', g), 0, NULL, NULL, 0,
         pg_temp.canon('credit') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(g::text) || '0:;0:;0:;'
  FROM acct, LATERAL (SELECT i * 16 + 1 AS pos) p,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(pos, :t0, :span, :total), (1::bigint << 40) + i) AS sid) q
  UNION ALL
  SELECT i, a, pos, 'credit', sid, x_amount, x_amount, 0, 1, 'succeeded', NULL,
         format('[[2, %s, %s, "1"]]', x_amount, x_expiry), 0, NULL, NULL, 0,
         pg_temp.canon('credit') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(x_amount::text) || '0:;0:;0:;' || pg_temp.canon(x_expiry::text) || pg_temp.canon('1')
  FROM acct, LATERAL (SELECT i * 16 + 2 AS pos) p,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(pos, :t0, :span, :total), (2::bigint << 40) + i) AS sid) q
  WHERE x
  UNION ALL
  SELECT i, a, (:N::bigint + i) * 16 + 1, 'expire', '2', x_amount, -x_amount, 0, 1, 'succeeded', NULL,
         format('[[2, %s, %s, "1"]]', x_amount, x_expiry), 0, NULL, NULL, 0,
         pg_temp.canon('expire') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon('2')
           || pg_temp.canon('0') || '0:;0:;0:;'
  FROM acct WHERE x
  UNION ALL
  -- The holds of transfers out and of held deductions (each captured below).
  SELECT i, a, base + ph, 'hold', sid, amount, NULL, amount, 1, 'succeeded', NULL,
         format('[[1, %s, null, "1"]]', amount), 0, NULL, 'captured', 0,
         pg_temp.canon('hold') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(amount::text) || '0:;0:;0:;'
  FROM own, LATERAL (SELECT CASE kind WHEN 'T' THEN 4 ELSE 8 END AS ph,
                            CASE kind WHEN 'T' THEN 1 + s % 50 ELSE 1 + s % 30 END AS amount,
                            CASE kind WHEN 'T' THEN 5 ELSE 8 END AS code) k,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(base + ph, :t0, :span, :total), (code::bigint << 40) + s) AS sid) q
  WHERE kind IN ('T', 'H')
  UNION ALL
  SELECT i, a, base + ph, 'capture', sid, amount, -amount, -amount, 1, 'succeeded', NULL,
         format('[[1, %s, null, "1"]]', amount), 0, NULL, NULL, 0,
         pg_temp.canon('capture') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon('0') || '0:;0:;0:;'
  FROM own, LATERAL (SELECT CASE kind WHEN 'T' THEN 6 ELSE 9 END AS ph, CASE kind WHEN 'T' THEN 4 ELSE 8 END AS held_at,
                            CASE kind WHEN 'T' THEN 1 + s % 50 ELSE 1 + s % 30 END AS amount,
                            CASE kind WHEN 'T' THEN 5 ELSE 8 END AS code) k,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(base + held_at, :t0, :span, :total), (code::bigint << 40) + s)
                  AS sid) q
  WHERE kind IN ('T', 'H')
  UNION ALL
  SELECT i, a, base + 7, 'debit', sid, 1 + s % 40, -(1 + s % 40), 0, 1, 'succeeded', NULL,
         format('[[1, %s, null, "1"]]', 1 + s % 40), CASE kind WHEN 'R' THEN 1 + s % 40 / 2 ELSE 0 END, NULL, NULL, 0,
         pg_temp.canon('debit') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon((1 + s % 40)::text) || '0:;0:;0:;'
  FROM own, LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(base + 7, :t0, :span, :total), (6::bigint << 40) + s) AS sid) q
  WHERE kind IN ('D', 'R')
  UNION ALL
  SELECT i, a, base + 10, 'refund', sid, 1 + s % 40 / 2, 1 + s % 40 / 2, 0, 1, 'succeeded', NULL,
         format('[[1, %s, null, "1"]]', 1 + s % 40 / 2), 0, base + 7, NULL, 0,
         pg_temp.canon('refund') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon((1 + s % 40 / 2)::text) || pg_temp.canon('debit') || pg_temp.canon(debit_sid) || '0:;'
  FROM own, LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(base + 10, :t0, :span, :total), (7::bigint << 40) + s) AS sid,
                            pg_temp.saga_id(pg_temp.ms(base + 7, :t0, :span, :total), (6::bigint << 40) + s)
                              AS debit_sid) q
  WHERE kind = 'R'
  UNION ALL
  SELECT i, a, base + 11, 'hold', sid, 0, NULL, 0, 0, 'rejected', 'insufficient_funds', NULL, 0, NULL, NULL, 0,
         pg_temp.canon('hold') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon('1000000000000') || '0:;0:;0:;'
  FROM own, LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(base + 11, :t0, :span, :total), (9::bigint << 40) + s) AS sid) q
  WHERE kind = 'F'
  UNION ALL
  -- A transfer's arrival: the source's hold came from its lot 1 (never
  -- expires), so it adds to this account's lot 1, on the same terms.
  SELECT i, a, base + 5, 'credit', sid, amount, amount, 0, 1, 'succeeded', NULL,
         format('[[1, %s, null, "1"]]', amount), 0, NULL, NULL, amount,
         pg_temp.canon('credit') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(amount::text) || '0:;0:;0:;' || pg_temp.canon(amount::text) || pg_temp.canon('never')
           || pg_temp.canon('1')
  FROM incoming, LATERAL (SELECT 1 + s % 50 AS amount,
                                 pg_temp.saga_id(pg_temp.ms(base + 4, :t0, :span, :total), (5::bigint << 40) + s)
                                   AS sid) q
  UNION ALL
  SELECT i, a, pos, 'credit', sid, e_amount, e_amount, 0, 1, 'succeeded', NULL,
         format('[[%s, %s, %s, "1"]]', 2 + x::int, e_amount, f_expiry), 0, NULL, NULL, 0,
         pg_temp.canon('credit') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(e_amount::text) || '0:;0:;0:;' || pg_temp.canon(f_expiry::text) || pg_temp.canon('1')
  FROM acct, LATERAL (SELECT ((:R + 1)::bigint * :N + i) * 16 + 2 AS pos) p,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(pos, :t0, :span, :total), (3::bigint << 40) + i) AS sid) q
  WHERE f
  UNION ALL
  -- The open hold: all of the expiring lot and 5 more from lot 1, or 7 to
  -- 16 from lot 1.
  SELECT i, a, pos, 'hold', sid, amount, NULL, amount, 1, 'succeeded', NULL,
         CASE WHEN f THEN format('[[%s, %s, %s, "1"], [1, 5, null, "1"]]', 2 + x::int, e_amount, f_expiry)
              ELSE format('[[1, %s, null, "1"]]', amount) END, 0, NULL, 'held', 0,
         pg_temp.canon('hold') || pg_temp.canon('bench') || pg_temp.canon(a) || pg_temp.canon(sid)
           || pg_temp.canon(amount::text) || '0:;0:;0:;'
  FROM acct, LATERAL (SELECT ((:R + 1)::bigint * :N + i) * 16 + 3 AS pos,
                             CASE WHEN f THEN e_amount + 5 ELSE 7 + i % 10 END AS amount) p,
       LATERAL (SELECT pg_temp.saga_id(pg_temp.ms(pos, :t0, :span, :total), (4::bigint << 40) + i) AS sid) q
  WHERE oh),
-- The account's figures right after each operation.
w AS MATERIALIZED (
  SELECT ev.*, pg_temp.ts(pg_temp.ms(pos, :t0, :span, :total)) AS at,
         sum(coalesce(delta, 0)) OVER running AS balance_after, sum(d_held) OVER running AS held_after,
         sum(bump) OVER running AS version_after
  FROM ev WINDOW running AS (PARTITION BY i ORDER BY pos)),
totals AS MATERIALIZED (
  SELECT c.*, t.balance, t.held, t.version, t.lot1_in, t.opened, t.updated
  FROM acct c JOIN (SELECT i, sum(coalesce(delta, 0)) AS balance, sum(d_held) AS held, sum(bump) AS version,
                           sum(lot1_in) AS lot1_in, min(at) AS opened, max(at) FILTER (WHERE bump = 1) AS updated
                    FROM w GROUP BY i) t USING (i)),
entries AS (
  INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses, created_at)
  SELECT pos + 1, 'bench', a, biz_type, biz_id, delta, balance_after, reverses + 1, at
  FROM w WHERE delta IS NOT NULL ORDER BY a, biz_type, biz_id),
operations AS (
  INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, balance_after,
                         held_after, version_after, ledger_seq, refunded, created_at, lots)
  SELECT 'bench', a, biz_type, biz_id, pg_temp.sha(canonical), state, amount, reason, balance_after, held_after,
         version_after, CASE WHEN delta IS NOT NULL THEN pos + 1 END, refunded, at, lots::jsonb
  FROM w ORDER BY a, biz_type, biz_id),
holds AS (
  INSERT INTO hold (tenant, account_id, hold_id, amount, captured, state, created_at, updated_at)
  SELECT 'bench', h.a, h.biz_id, h.amount, CASE h.hold_state WHEN 'captured' THEN h.amount ELSE 0 END, h.hold_state,
         h.at, coalesce(c.at, h.at)
  FROM w h LEFT JOIN w c ON c.i = h.i AND c.biz_type = 'capture' AND c.biz_id = h.biz_id
  WHERE h.hold_state IS NOT NULL ORDER BY h.a, h.biz_id),
lots AS (
  INSERT INTO lot (tenant, account_id, lot_id, granted, remaining, held, expired, expires_at, rule_version, origin,
                   grace_ms, source_type, source_id, state, created_at, updated_at)
  SELECT 'bench', a, lot_id, granted, remaining, held, expired, pg_temp.ts(expires_at), '1', 'grant', NULL, 'credit',
         source_id, state, created, updated
  FROM (
    SELECT t.a, 1 AS lot_id, t.g + t.lot1_in AS granted,
           t.balance - CASE WHEN t.f THEN t.e_amount ELSE 0 END AS remaining,
           t.held - CASE WHEN t.oh AND t.f THEN t.e_amount ELSE 0 END AS held, 0 AS expired, NULL::bigint AS expires_at,
           w.biz_id AS source_id, 'open' AS state, w.at AS created, t.updated
    FROM totals t JOIN w ON w.i = t.i AND w.pos = t.i * 16 + 1
    UNION ALL
    SELECT t.a, 2, t.x_amount, 0, 0, t.x_amount, t.x_expiry, w.biz_id, 'expired', w.at, e.at
    FROM totals t JOIN w ON w.i = t.i AND w.pos = t.i * 16 + 2
    JOIN w e ON e.i = t.i AND e.pos = (:N::bigint + t.i) * 16 + 1
    WHERE t.x
    UNION ALL
    SELECT t.a, 2 + t.x::int, t.e_amount, t.e_amount, CASE WHEN t.oh THEN t.e_amount ELSE 0 END, 0, t.f_expiry,
           w.biz_id, 'open', w.at, CASE WHEN t.oh THEN t.updated ELSE w.at END
    FROM totals t JOIN w ON w.i = t.i AND w.pos = ((:R + 1)::bigint * :N + t.i) * 16 + 2
    WHERE t.f) l
  ORDER BY a, lot_id)
INSERT INTO account (tenant, account_id, balance, held, status, version, created_at, updated_at, lot_count)
SELECT 'bench', a, balance, held, 'active', version, opened, updated, 1 + x::int + f::int
FROM totals ORDER BY a;
