-- One chunk of the saga store: the sagas of accounts i0..i1-1 (the
-- account a credit or deduction names, a transfer's source), each with
-- its attempts, as the orchestrator stores them (orchestrator/store,
-- orchestrator/saga/codec.cpp). They are the sagas behind the operations
-- of shard.sql, with the same ids: codes 1 welcome credit, 2 credit on a
-- lot that expired, 3 credit on a lot expiring later, 4 held deduction
-- awaiting confirmation (its hold is open; the hold timeout is a week, so
-- nothing wakes it during a run), 5 transfer, 6 deduction, 7 refund of a
-- deduction, 8 held deduction confirmed, 9 transfer refused. Every other
-- saga is settled: no wake time, no lease.
-- Variables (psql -v): N, S, R, t0, span, total (common.sql), i0, i1.
\set ON_ERROR_STOP on
\ir common.sql
SET work_mem = '256MB';
-- A JIT compilation of these statements takes longer (seconds) than running them.
SET jit = off;

-- A call's progress (codec.cpp, call_json): sent at t0, answered at t1.
CREATE FUNCTION pg_temp.call(code text, status text, t0 bigint, t1 bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '{"c":"' || code || '","d":' || t0 + 2000 || ',"dv":true,"n":1,"s":"' || status || '","t0":' || t0
    || ',"t1":' || t1 || '}'
$$;
-- A call and its undo, never sent.
CREATE FUNCTION pg_temp.idle() RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '{"c":"","d":0,"dv":false,"n":0,"s":"idle","t0":0,"t1":0}'
$$;
-- A saga's progress (codec.cpp, progress_to_json); calls: one JSON array per step.
CREATE FUNCTION pg_temp.progress(calls text, confirmed boolean, cursor int, hold_deadline bigint, stage text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '{"calls":[' || calls || '],"confirmed":' || confirmed || ',"cursor":' || cursor
    || ',"end":"failed","hold_deadline":' || coalesce(hold_deadline::text, 'null') || ',"stage":"' || stage || '"}'
$$;
-- The canonical form of a saga request (common/contract/saga_request.cpp,
-- hash_of), for a request without items; expiry: a credit's lot expiry.
CREATE FUNCTION pg_temp.request(type text, biz_id text, account text, source text, destination text, amount bigint,
                                expiry bigint, hold_timeout text, original text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT pg_temp.canon(type) || pg_temp.canon('bench') || pg_temp.canon(biz_id) || pg_temp.canon(account)
    || pg_temp.canon(source) || pg_temp.canon(destination) || pg_temp.canon(amount::text) || '0:;'
    || CASE WHEN expiry IS NULL THEN '' ELSE pg_temp.canon(expiry::text) || '0:;' END
    || pg_temp.canon(hold_timeout) || '0:;' || pg_temp.canon(original) || pg_temp.canon('0')
$$;
-- A shard command as the orchestrator records it (shard_call.cpp; keys in
-- nlohmann's order).
CREATE FUNCTION pg_temp.command(type text, account text, amount bigint, biz_id text, extra text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT '{"account_id":"' || account || '"' || CASE WHEN amount IS NULL THEN '' ELSE ',"amount":' || amount END
    || ',"biz_id":"' || biz_id || '"' || extra || ',"tenant":"bench","type":"' || type || '"}'
$$;

WITH acct AS MATERIALIZED (
  SELECT i, 'acc-' || i AS a, 's' || pg_temp.shard_of(i) AS sh, 1000000 + i % 1000 AS g, 100 + i % 50 AS x_amount,
         200 + i % 100 AS e_amount, pg_temp.flag(i, 1, 10) AS x, pg_temp.flag(i, 2, 30) AS f,
         pg_temp.flag(i, 3, 2) AS oh,
         pg_temp.ms(((:R + 1)::bigint * :N + i) * 16, :t0, :span, :total) / 86400000 * 86400000
           + (31 + i % 300) * 86400000 AS f_expiry,
         pg_temp.ms((:N::bigint + i) * 16, :t0, :span, :total) AS x_expiry
  FROM generate_series(:i0::bigint, :i1::bigint - 1) i),
own AS MATERIALIZED (
  SELECT c.i, c.a, c.sh, m, s, pg_temp.kind(s) AS kind, (m * :N + c.i) * 16 AS base, 'acc-' || dst AS dst,
         CASE WHEN pg_temp.kind(s) = 'T' THEN 's' || pg_temp.shard_of(dst) END AS dst_sh
  FROM acct c CROSS JOIN generate_series(1::bigint, :R) m
  CROSS JOIN LATERAL (SELECT (m - 1) * :N + c.i AS s, (c.i + pg_temp.offset_of(m, :N)) % :N AS dst) t
  WHERE s < :S),
-- Every saga: its row, and its attempts as parallel arrays (one per step).
sg AS MATERIALIZED (
  SELECT sid, 'welcome-' || i AS biz, 'credit' AS type, 'credit' AS workflow,
         jsonb_build_object('amount', g, 'account', a) AS input, 'completed' AS state,
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"u":' || pg_temp.idle() || '}]',
                          false, 0, NULL, 'done') AS progress,
         NULL AS error_code, NULL AS error_message, c, c + 2 AS updated, NULL::bigint AS wake, 2 AS version,
         pg_temp.request('credit', 'welcome-' || i, a, '', '', g, NULL, '', '') AS canonical,
         ARRAY['credit_account'] AS steps, ARRAY[sh] AS shards,
         ARRAY[pg_temp.command('credit', a, g, sid, '')] AS commands, ARRAY['succeeded'] AS outcomes,
         ARRAY[NULL] AS codes
  FROM acct, LATERAL (SELECT pg_temp.ms(i * 16 + 1, :t0, :span, :total) AS c) t,
       LATERAL (SELECT pg_temp.saga_id(c, (1::bigint << 40) + i) AS sid) q
  UNION ALL
  -- Credits on an expiring lot: the lot that expired in round 1 (code 2),
  -- and the one that expires after the run (code 3).
  SELECT sid, biz, 'credit', 'credit', jsonb_build_object('amount', amount, 'account', a, 'expires_at_ms', expiry),
         'completed',
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"u":' || pg_temp.idle() || '}]',
                          false, 0, NULL, 'done'),
         NULL, NULL, c, c + 2, NULL, 2, pg_temp.request('credit', biz, a, '', '', amount, expiry, '', ''),
         ARRAY['credit_account'], ARRAY[sh],
         ARRAY[pg_temp.command('credit', a, amount, sid, ',"expires_at":"' || pg_temp.rfc3339(expiry) || '"')],
         ARRAY['succeeded'], ARRAY[NULL]
  FROM (SELECT i, a, sh, 2 AS code, 'promo-' || i AS biz, x_amount AS amount, x_expiry AS expiry, i * 16 + 2 AS pos
        FROM acct WHERE x
        UNION ALL
        SELECT i, a, sh, 3, 'grant-' || i, e_amount, f_expiry, ((:R + 1)::bigint * :N + i) * 16 + 2
        FROM acct WHERE f) e,
       LATERAL (SELECT pg_temp.ms(pos, :t0, :span, :total) AS c) t,
       LATERAL (SELECT pg_temp.saga_id(c, (code::bigint << 40) + i) AS sid) q
  UNION ALL
  SELECT sid, 'order-' || i, 'deduct', 'deduct_held',
         jsonb_build_object('amount', amount, 'account', a, 'hold_timeout_ms', 604800000), 'awaiting_confirmation',
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"l":' || held || ',"u":'
                          || pg_temp.idle() || '}],[{"f":' || pg_temp.idle() || ',"u":' || pg_temp.idle() || '}]',
                          false, 0, c + 2 + 604800000, 'awaiting'),
         NULL, NULL, c, c + 2, c + 2 + 604800000, 2,
         pg_temp.request('deduct', 'order-' || i, a, '', '', amount, NULL, '604800000', ''),
         ARRAY['hold_account'], ARRAY[sh], ARRAY[pg_temp.command('hold', a, amount, sid, '')], ARRAY['succeeded'],
         ARRAY[NULL]
  FROM acct,
       LATERAL (SELECT pg_temp.ms(((:R + 1)::bigint * :N + i) * 16 + 3, :t0, :span, :total) AS c,
                       CASE WHEN f THEN e_amount + 5 ELSE 7 + i % 10 END AS amount,
                       CASE WHEN f THEN format('[[%s,%s,"1"],[5,null,"1"]]', e_amount, f_expiry)
                            ELSE format('[[%s,null,"1"]]', 7 + i % 10) END AS held) t,
       LATERAL (SELECT pg_temp.saga_id(c, (4::bigint << 40) + i) AS sid) q
  WHERE oh
  UNION ALL
  SELECT sid, 't-' || s, 'transfer', 'transfer', jsonb_build_object('amount', amount, 'source', a, 'destination', dst),
         'completed',
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"l":[[' || amount || ',null,"1"]],"u":'
                          || pg_temp.idle() || '}],[{"f":' || pg_temp.call('', 'succeeded', c + 3, c + 5) || ',"u":'
                          || pg_temp.idle() || '}],[{"f":' || pg_temp.call('', 'succeeded', c + 6, c + 8) || ',"u":'
                          || pg_temp.idle() || '}]', false, 2, NULL, 'done'),
         NULL, NULL, c, c + 8, NULL, 2, pg_temp.request('transfer', 't-' || s, '', a, dst, amount, NULL, '', ''),
         ARRAY['hold_source', 'credit_destination', 'capture_source'], ARRAY[sh, dst_sh, sh],
         ARRAY[pg_temp.command('hold', a, amount, sid, ''),
               pg_temp.command('credit', dst, amount, sid, ',"lots":[{"amount":' || amount || ',"rule_version":"1"}]'),
               pg_temp.command('capture', a, NULL, sid, '')],
         ARRAY['succeeded', 'succeeded', 'succeeded'], ARRAY[NULL, NULL, NULL]
  FROM own, LATERAL (SELECT pg_temp.ms(base + 4, :t0, :span, :total) AS c, 1 + s % 50 AS amount) t,
       LATERAL (SELECT pg_temp.saga_id(c, (5::bigint << 40) + s) AS sid) q
  WHERE kind = 'T'
  UNION ALL
  SELECT sid, 'd-' || s, 'deduct', 'deduct', jsonb_build_object('amount', amount, 'account', a), 'completed',
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"u":' || pg_temp.idle() || '}]',
                          false, 0, NULL, 'done'),
         NULL, NULL, c, c + 2, NULL, 2, pg_temp.request('deduct', 'd-' || s, a, '', '', amount, NULL, '', ''),
         ARRAY['debit_account'], ARRAY[sh], ARRAY[pg_temp.command('debit', a, amount, sid, '')], ARRAY['succeeded'],
         ARRAY[NULL]
  FROM own, LATERAL (SELECT pg_temp.ms(base + 7, :t0, :span, :total) AS c, 1 + s % 40 AS amount) t,
       LATERAL (SELECT pg_temp.saga_id(c, (6::bigint << 40) + s) AS sid) q
  WHERE kind IN ('D', 'R')
  UNION ALL
  SELECT sid, 'r-' || s, 'refund', 'refund',
         jsonb_build_object('amount', amount, 'account', a, 'original_key', debit_sid, 'original_type', 'debit',
                            'original_saga_id', debit_sid), 'completed',
         pg_temp.progress('[{"a":' || amount || ',"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"u":'
                          || pg_temp.idle() || '}]', false, 0, NULL, 'done'),
         NULL, NULL, c, c + 2, NULL, 2, pg_temp.request('refund', 'r-' || s, '', '', '', amount, NULL, '', debit_sid),
         ARRAY['refund_account'], ARRAY[sh],
         ARRAY[pg_temp.command('refund', a, amount, sid,
                               ',"original_id":"' || debit_sid || '","original_type":"debit"')],
         ARRAY['succeeded'], ARRAY[NULL]
  FROM own, LATERAL (SELECT pg_temp.ms(base + 10, :t0, :span, :total) AS c, 1 + s % 40 / 2 AS amount,
                            pg_temp.saga_id(pg_temp.ms(base + 7, :t0, :span, :total), (6::bigint << 40) + s)
                              AS debit_sid) t,
       LATERAL (SELECT pg_temp.saga_id(c, (7::bigint << 40) + s) AS sid) q
  WHERE kind = 'R'
  UNION ALL
  SELECT sid, 'h-' || s, 'deduct', 'deduct_held',
         jsonb_build_object('amount', amount, 'account', a, 'hold_timeout_ms', 60000), 'completed',
         pg_temp.progress('[{"f":' || pg_temp.call('', 'succeeded', c, c + 2) || ',"l":[[' || amount || ',null,"1"]],"u":'
                          || pg_temp.idle() || '}],[{"f":' || pg_temp.call('', 'succeeded', c + 3, c + 5) || ',"u":'
                          || pg_temp.idle() || '}]', true, 1, c + 2 + 60000, 'done'),
         NULL, NULL, c, c + 5, NULL, 5, pg_temp.request('deduct', 'h-' || s, a, '', '', amount, NULL, '60000', ''),
         ARRAY['hold_account', 'capture_account'], ARRAY[sh, sh],
         ARRAY[pg_temp.command('hold', a, amount, sid, ''), pg_temp.command('capture', a, NULL, sid, '')],
         ARRAY['succeeded', 'succeeded'], ARRAY[NULL, NULL]
  FROM own, LATERAL (SELECT pg_temp.ms(base + 8, :t0, :span, :total) AS c, 1 + s % 30 AS amount) t,
       LATERAL (SELECT pg_temp.saga_id(c, (8::bigint << 40) + s) AS sid) q
  WHERE kind = 'H'
  UNION ALL
  SELECT sid, 'f-' || s, 'transfer', 'transfer',
         jsonb_build_object('amount', 1000000000000, 'source', a, 'destination', dst), 'failed',
         pg_temp.progress('[{"f":' || pg_temp.call('insufficient_funds', 'rejected', c, c + 2) || ',"u":'
                          || pg_temp.idle() || '}],[{"f":' || pg_temp.idle() || ',"u":' || pg_temp.idle()
                          || '}],[{"f":' || pg_temp.idle() || ',"u":' || pg_temp.idle() || '}]', false, 0, NULL,
                          'done'),
         'insufficient_funds', 'step hold_source was refused: insufficient_funds', c, c + 2, NULL, 2,
         pg_temp.request('transfer', 'f-' || s, '', a, dst, 1000000000000, NULL, '', ''),
         ARRAY['hold_source'], ARRAY[sh], ARRAY[pg_temp.command('hold', a, 1000000000000, sid, '')],
         ARRAY['rejected'], ARRAY['insufficient_funds']
  FROM own, LATERAL (SELECT pg_temp.ms(base + 11, :t0, :span, :total) AS c) t,
       LATERAL (SELECT pg_temp.saga_id(c, (9::bigint << 40) + s) AS sid) q
  WHERE kind = 'F'),
attempts AS (
  INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, code, answered_at)
  SELECT sid, st.step, 0, false, 1, st.shard, st.command::json, pg_temp.ts(c + 3 * (st.k - 1)), st.outcome, st.code,
         pg_temp.ts(c + 3 * (st.k - 1) + 2)
  FROM sg, unnest(steps, shards, commands, outcomes, codes) WITH ORDINALITY st(step, shard, command, outcome, code, k)
  ORDER BY sid, st.step)
INSERT INTO saga (saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, error_code,
                  error_message, attention, created_at, updated_at, deadline, wake_at, lease_owner, version)
SELECT sid, 'bench', type, biz, pg_temp.sha(canonical), workflow, input, state, progress::json, error_code,
       error_message, NULL, pg_temp.ts(c), pg_temp.ts(updated), pg_temp.ts(c + 10000), pg_temp.ts(wake), NULL, version
FROM sg ORDER BY sid;
