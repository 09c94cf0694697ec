#pragma once
// What the saga store (saga_store.cpp) sends: each statement, with the
// columns its reads return and the layout of the arrays it takes.
#include <string_view>

namespace tally::orch::saga_sql {

// The columns every read returns; saga_col names them in select order.
#define TALLY_SAGA_COLUMNS                                                                                        \
  "s.saga_id, s.tenant, s.type, s.biz_id, s.request_hash, s.workflow, s.input::text, s.state, s.progress::text, " \
  "s.error_code, s.error_message, s.attention, (extract(epoch FROM s.created_at) * 1000)::bigint, "               \
  "(extract(epoch FROM s.updated_at) * 1000)::bigint, (extract(epoch FROM s.deadline) * 1000)::bigint, "          \
  "(extract(epoch FROM s.wake_at) * 1000)::bigint, s.version"
enum class saga_col {
  saga_id,
  tenant,
  type,
  biz_id,
  request_hash,
  workflow,
  input,
  state,
  progress,
  error_code,
  error_message,
  attention,
  created_ms,
  updated_ms,
  deadline_ms,
  wake_ms,
  version
};

// The counts by state (saga_state_count) move by what a statement wrote:
// rows of (tenant, state, change), added to this session's own slot, so
// concurrent writers never wait for one another's counts.
#define TALLY_COUNT_SAGAS(changes)                                 \
  "INSERT INTO saga_state_count AS c (tenant, state, slot, sagas)" \
  " SELECT tenant, state, pg_backend_pid(), change FROM (" changes \
  ") AS m(tenant, state, change)"                                  \
  " ORDER BY tenant, state"                                        \
  " ON CONFLICT (tenant, state, slot) DO UPDATE SET sagas = c.sagas + EXCLUDED.sagas"

// One statement per round creates every new saga of the round: the rows
// whose (tenant, type, biz_id) is free, with their first outbox event (a
// new saga has no answered attempt yet). $1 is the lease owner, $2–$17 the
// sagas' columns.
inline constexpr std::string_view sql_insert =
    "WITH w AS MATERIALIZED (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],"
    "  $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[],"
    "  $15::bigint[], $16::bigint[], $17::boolean[])"
    "  AS w(saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, error_code,"
    "   error_message, attention, created, deadline, wake, keep)),"
    " ins AS ("
    " INSERT INTO saga (saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, error_code,"
    "  error_message, attention, created_at, updated_at, deadline, wake_at, lease_owner, version)"
    " SELECT saga_id, tenant, type, biz_id, request_hash, workflow, input::jsonb, state, progress::json,"
    "  error_code, error_message, attention, to_timestamp(created / 1000.0), to_timestamp(created / 1000.0),"
    "  to_timestamp(deadline / 1000.0), to_timestamp(wake / 1000.0), CASE WHEN keep THEN $1 END, 1 FROM w"
    " ON CONFLICT (tenant, biz_id, type) DO NOTHING RETURNING tenant, saga_id, state),"
    " counted AS (" TALLY_COUNT_SAGAS("SELECT tenant, state, count(*) FROM ins GROUP BY tenant, state") "),"
    " ev AS (INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)"
    "  SELECT ins.tenant, ins.saga_id, 1, 'saga.state', e.payload::json"
    "  FROM ins JOIN unnest($18::text[], $19::text[]) AS e(saga_id, payload) USING (saga_id))"
    " SELECT saga_id FROM ins";
enum class insert_col { saga_id };
// One statement per round saves every other write of the round: a saga is
// written only while this instance ($1) holds it at the version the write
// names. An event is written where the payload is not NULL. $2 is now.
inline constexpr std::string_view sql_save =
    "WITH w AS MATERIALIZED (SELECT * FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[],"
    "  $8::text[], $9::text[], $10::bigint[], $11::boolean[], $12::text[])"
    "  AS w(saga_id, version, state, progress, error_code, error_message, attention, wake, keep, payload)),"
    " u AS ("
    " UPDATE saga s SET state = w.state, progress = w.progress::json, error_code = w.error_code,"
    "  error_message = w.error_message, attention = w.attention, updated_at = to_timestamp($2::bigint / 1000.0),"
    "  wake_at = CASE WHEN w.wake IS NOT NULL AND EXISTS (SELECT 1 FROM saga_action a"
    "   WHERE a.saga_id = s.saga_id AND a.status = 'pending') THEN to_timestamp($2::bigint / 1000.0)"
    "   ELSE to_timestamp(w.wake / 1000.0) END,"
    "  lease_owner = CASE WHEN w.keep THEN s.lease_owner END, version = s.version + 1"
    " FROM w JOIN saga was USING (saga_id)"
    " WHERE s.saga_id = w.saga_id AND s.version = w.version AND s.lease_owner = $1"
    " RETURNING s.tenant, s.saga_id, s.version, was.state AS was, s.state),"
    " counted AS (" TALLY_COUNT_SAGAS("SELECT tenant, state, sum(change) FROM (SELECT tenant, was AS state, -1 AS change"
                                      "  FROM u WHERE was <> state UNION ALL SELECT tenant, state, 1 FROM u"
                                      "  WHERE was <> state) moved GROUP BY tenant, state") "),"
    " ev AS (INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)"
    "  SELECT u.tenant, u.saga_id, u.version, 'saga.state', w.payload::json FROM u JOIN w USING (saga_id)"
    "  WHERE w.payload IS NOT NULL),"
    // The answered attempts, as eleven parallel arrays, of the sagas written.
    " st AS (INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, code,"
    "  answered_at)"
    "  SELECT a.saga_id, a.step, a.item, a.undo, a.attempt, a.shard, a.command::json,"
    "   to_timestamp(a.sent / 1000.0), a.outcome, a.code, to_timestamp(a.answered / 1000.0)"
    "  FROM unnest($13::text[], $14::text[], $15::int[], $16::boolean[], $17::int[], $18::text[], $19::text[],"
    "   $20::bigint[], $21::text[], $22::text[], $23::bigint[])"
    "   AS a(saga_id, step, item, undo, attempt, shard, command, sent, outcome, code, answered)"
    "  JOIN u USING (saga_id)"
    "  ON CONFLICT (saga_id, step, item, undo, attempt) DO NOTHING)"
    " SELECT saga_id, version FROM u";
enum class save_col { saga_id, version };  // in select order
inline constexpr std::string_view sql_by_id = "SELECT " TALLY_SAGA_COLUMNS " FROM saga s WHERE s.saga_id = $1";
// Due sagas whose holder's heartbeat lapsed, and this instance's own that
// have been due for a lease period ($4 ms) without a write: a claim whose
// COMMIT's answer was lost (a failover) leases sagas that no one drives,
// and this instance's heartbeat would keep them so for ever. Claimed again,
// the version bump fences off any driver of them left here, and their wake
// moves to now, so that they are not claimed again before another period.
inline constexpr std::string_view sql_claim =
    "UPDATE saga s SET lease_owner = $1, version = s.version + 1,"
    " wake_at = CASE WHEN s.lease_owner = $1 THEN to_timestamp($2::bigint / 1000.0) ELSE s.wake_at END"
    " FROM (SELECT saga_id FROM saga WHERE wake_at <= to_timestamp($2::bigint / 1000.0)"
    "  AND (lease_owner IS NULL"
    "   OR (lease_owner = $1 AND wake_at <= to_timestamp(($2::bigint - $4::bigint) / 1000.0))"
    "   OR NOT EXISTS (SELECT 1 FROM orchestrator_instance i"
    "   WHERE i.instance = saga.lease_owner AND i.alive_until >= to_timestamp($2::bigint / 1000.0)))"
    "  ORDER BY wake_at LIMIT $3 FOR UPDATE SKIP LOCKED) due"
    " WHERE s.saga_id = due.saga_id RETURNING " TALLY_SAGA_COLUMNS;
// Overdue: still on its way to the pivot (or undoing) past its deadline.
#define TALLY_SAGA_OVERDUE(now) \
  "s.state IN ('pending', 'running', 'compensating') AND s.deadline < to_timestamp(" now "::bigint / 1000.0)"
// The counts by state that the writing statements keep, one row per
// tenant, state and writing session (0: sessions that ended, folded); and
// the overdue ones among the sagas still on their way.
inline constexpr std::string_view sql_counts =
    "SELECT state, sum(sagas)::bigint, 0::bigint FROM saga_state_count WHERE tenant = $1 GROUP BY state"
    " UNION ALL SELECT 'overdue', 0, count(*) FROM saga s WHERE s.tenant = $1 AND " TALLY_SAGA_OVERDUE("$2");
enum class counts_col { state, sagas, overdue };  // in select order
// Rows of sessions no longer running move into slot 0 (a pid taken again
// by a new session only adds to what its rows hold: counts are sums).
inline constexpr std::string_view sql_fold_counts =
    "WITH gone AS (DELETE FROM saga_state_count c WHERE c.slot <> 0"
    "  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.slot) RETURNING tenant, state, sagas)"
    " INSERT INTO saga_state_count AS c (tenant, state, slot, sagas)"
    " SELECT tenant, state, 0, sum(sagas) FROM gone GROUP BY tenant, state ORDER BY tenant, state"
    " ON CONFLICT (tenant, state, slot) DO UPDATE SET sagas = c.sagas + EXCLUDED.sagas";
// A page of sagas with attempts, in saga id (creation) order from $1 up
// to the first id of $2's millisecond, and of those the settled ones that
// settled before $2 lose their attempts.
inline constexpr std::string_view sql_compact =
    "WITH page AS (SELECT DISTINCT saga_id FROM saga_step WHERE saga_id > $1 AND saga_id < $2"
    "  ORDER BY saga_id LIMIT $4),"
    " settled AS (SELECT p.saga_id FROM page p JOIN saga s USING (saga_id)"
    "  WHERE s.state IN ('completed', 'failed', 'compensated') AND s.updated_at < to_timestamp($3::bigint / 1000.0)),"
    " gone AS (DELETE FROM saga_step st USING settled WHERE st.saga_id = settled.saga_id RETURNING st.saga_id)"
    " SELECT (SELECT count(*) FROM page) AS sagas_read, (SELECT count(*) FROM settled) AS sagas,"
    " (SELECT count(*) FROM gone) AS attempts, (SELECT max(saga_id) FROM page) AS last";
enum class compact_col { sagas_read, sagas, attempts, last };
inline constexpr std::string_view sql_refunds_of = "SELECT " TALLY_SAGA_COLUMNS
                                                   " FROM saga s WHERE s.tenant = $1 AND s.type = 'refund'"
                                                   " AND s.input->>'original_saga_id' = $2 ORDER BY s.saga_id";
inline constexpr std::string_view sql_attempts =
    "SELECT step, item, undo, attempt, shard, command::text, (extract(epoch FROM sent_at) * 1000)::bigint, outcome,"
    " code, (extract(epoch FROM answered_at) * 1000)::bigint FROM saga_step WHERE saga_id = $1"
    " ORDER BY sent_at, step, item, undo, attempt";
// In select order.
enum class attempt_col { step, item, undo, attempt, shard, command, sent_ms, outcome, code, answered_ms };
inline constexpr std::string_view sql_release_all = "DELETE FROM orchestrator_instance WHERE instance = $1";
inline constexpr std::string_view sql_release =
    "UPDATE saga SET lease_owner = NULL WHERE saga_id = $1 AND lease_owner = $2";
inline constexpr std::string_view sql_request_action =
    "WITH a AS (INSERT INTO saga_action (saga_id, action) VALUES ($1, $2) RETURNING id),"
    " due AS (UPDATE saga SET wake_at = LEAST(wake_at, to_timestamp($3::bigint / 1000.0))"
    "  WHERE saga_id = $1 AND state NOT IN ('completed', 'failed', 'compensated'))"
    " SELECT id, pg_notify($4, $1) FROM a";
enum class request_action_col { id, notified };  // in select order
inline constexpr std::string_view sql_take_actions =
    "UPDATE saga_action a SET status = 'taken' FROM saga s"
    " WHERE a.status = 'pending' AND a.saga_id = s.saga_id AND s.lease_owner = $1"
    " RETURNING a.id, a.saga_id, a.action";
enum class take_action_col { id, saga_id, action };  // in select order
inline constexpr std::string_view sql_return_action =
    "WITH a AS (UPDATE saga_action SET status = 'pending' WHERE id = $1 RETURNING saga_id),"
    " due AS (UPDATE saga s SET wake_at = LEAST(s.wake_at, to_timestamp($2::bigint / 1000.0)) FROM a"
    "  WHERE s.saga_id = a.saga_id AND s.state NOT IN ('completed', 'failed', 'compensated'))"
    " SELECT pg_notify($3, saga_id) FROM a";
inline constexpr std::string_view sql_finish_action =
    "WITH f AS (UPDATE saga_action SET status = 'finished', result = $2, finished_at = now() WHERE id = $1"
    "  RETURNING id)"
    " SELECT pg_notify($3, id::text) FROM f";
inline constexpr std::string_view sql_action_result =
    "SELECT result FROM saga_action WHERE id = $1 AND status = 'finished'";
enum class action_result_col { result };
// Heartbeats of instances gone for a day are forgotten on the way.
inline constexpr std::string_view sql_renew =
    "WITH gone AS (DELETE FROM orchestrator_instance"
    "  WHERE alive_until < to_timestamp($2::bigint / 1000.0) - interval '1 day' AND instance <> $1)"
    " INSERT INTO orchestrator_instance (instance, alive_until) VALUES ($1, to_timestamp($2::bigint / 1000.0))"
    " ON CONFLICT (instance) DO UPDATE SET alive_until = EXCLUDED.alive_until";

inline constexpr std::string_view saga_columns = TALLY_SAGA_COLUMNS;

#undef TALLY_SAGA_COLUMNS
#undef TALLY_COUNT_SAGAS
#undef TALLY_SAGA_OVERDUE

}  // namespace tally::orch::saga_sql
