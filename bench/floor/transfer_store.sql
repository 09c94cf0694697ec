-- The rows one batch of :n transfer sagas must write in the saga store, as
-- the two transactions the orchestrator commits for each since issue 20:
-- the create with the hold in flight (the credit and the capture go out
-- without a write-ahead of their own), and the final save: the saga row,
-- its two state-change events (created, completed), and one attempt row
-- per call, written once answered (by the final save). No lookups, no
-- leases.
\set n 50
SELECT nextval('floor_batch') AS b \gset
BEGIN;
INSERT INTO saga (saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, created_at,
                  updated_at, deadline, wake_at, lease_owner, version)
  SELECT 'sg-' || :b || '-' || g, 'bench', 'transfer', 'tr-' || :b || '-' || g, md5(:b || '-' || g) || md5(g || '-' || :b),
         'transfer',
         ('{"source":"acc-' || ((:b * :n + g * 7919) % 10000) || '","destination":"acc-'
          || (10000 + (:b * :n + g * 7907) % 10000) || '","amount":1,"timeout_ms":10000}')::jsonb,
         'running',
         ('{"calls":[[{"f":{"s":"sent","n":1,"t0":1764650000000}}],[],[]],"pivoted":false}')::json,
         now(), now(), now() + interval '10 s', now() + interval '1 s', 'orch-1-0a1b2c3d', 1
  FROM generate_series(1, :n) g;
INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)
  SELECT 'bench', 'sg-' || :b || '-' || g, 1, 'saga.state',
         ('{"saga_id":"sg-' || :b || '-' || g || '","type":"transfer","tenant":"bench","biz_id":"tr-' || :b || '-' || g
          || '","state":"running","input":{"from_account":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","to_account":"acc-' || (10000 + (:b * :n + g * 7907) % 10000) || '","amount":1},"steps":['
          || '{"name":"hold_source","state":"running","attempts":1,"started_at":"2026-12-02T05:00:00.000Z"},'
          || '{"name":"credit_destination","state":"pending","attempts":0},'
          || '{"name":"capture_source","state":"pending","attempts":0}],'
          || '"created_at":"2026-12-02T05:00:00.000Z","updated_at":"2026-12-02T05:00:00.000Z",'
          || '"deadline":"2026-12-02T05:00:10.000Z","version":1}')::json
  FROM generate_series(1, :n) g;
COMMIT;
BEGIN;
UPDATE saga s SET state = 'completed', progress = ('{"calls":[[{"f":{"s":"succeeded","n":1,"t0":1764650000000,"t1":1764650000005,"dv":true}}],'
          || '[{"f":{"s":"succeeded","n":1,"t0":1764650000006,"t1":1764650000011,"dv":true}}],'
          || '[{"f":{"s":"succeeded","n":1,"t0":1764650000012,"t1":1764650000017,"dv":true}}]],"pivoted":true,"k":' || g || '}')::json,
       updated_at = now(), wake_at = NULL, lease_owner = NULL, version = s.version + 1
  FROM (SELECT 'sg-' || :b || '-' || g AS saga_id, g FROM generate_series(1, :n) g) k
  WHERE s.saga_id = k.saga_id;
INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)
  SELECT 'bench', 'sg-' || :b || '-' || g, 2, 'saga.state',
         ('{"saga_id":"sg-' || :b || '-' || g || '","type":"transfer","tenant":"bench","biz_id":"tr-' || :b || '-' || g
          || '","state":"completed","input":{"from_account":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","to_account":"acc-' || (10000 + (:b * :n + g * 7907) % 10000) || '","amount":1},"steps":['
          || '{"name":"hold_source","state":"succeeded","attempts":1,"started_at":"2026-12-02T05:00:00.000Z","finished_at":"2026-12-02T05:00:00.005Z"},'
          || '{"name":"credit_destination","state":"succeeded","attempts":1,"started_at":"2026-12-02T05:00:00.006Z","finished_at":"2026-12-02T05:00:00.011Z"},'
          || '{"name":"capture_source","state":"succeeded","attempts":1,"started_at":"2026-12-02T05:00:00.012Z","finished_at":"2026-12-02T05:00:00.017Z"}],'
          || '"created_at":"2026-12-02T05:00:00.000Z","updated_at":"2026-12-02T05:00:00.017Z",'
          || '"deadline":"2026-12-02T05:00:10.000Z","version":2}')::json
  FROM generate_series(1, :n) g;
INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, answered_at)
  SELECT 'sg-' || :b || '-' || g, 'hold_source', 0, false, 1, 's0',
         ('{"type":"hold","tenant":"bench","account_id":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","biz_id":"sg-' || :b || '-' || g || ':hold","amount":1}')::json, now(), 'succeeded', now()
  FROM generate_series(1, :n) g;
INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, answered_at)
  SELECT 'sg-' || :b || '-' || g, 'credit_destination', 0, false, 1, 's1',
         ('{"type":"credit","tenant":"bench","account_id":"acc-' || (10000 + (:b * :n + g * 7907) % 10000)
          || '","biz_id":"sg-' || :b || '-' || g || ':credit","amount":1}')::json, now(), 'succeeded', now()
  FROM generate_series(1, :n) g;
INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, answered_at)
  SELECT 'sg-' || :b || '-' || g, 'capture_source', 0, false, 1, 's0',
         ('{"type":"capture","tenant":"bench","account_id":"acc-' || ((:b * :n + g * 7919) % 10000)
          || '","biz_id":"sg-' || :b || '-' || g || ':capture","hold_id":"sg-' || :b || '-' || g || ':hold","amount":1}')::json,
         now(), 'succeeded', now()
  FROM generate_series(1, :n) g;
COMMIT;
