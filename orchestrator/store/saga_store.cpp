#include "orchestrator/store/saga_store.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"
#include "orchestrator/saga/codec.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using pg::param;

namespace {

// The columns every read returns, in the order decode() reads them.
#define TALLY_SAGA_COLUMNS                                                                                        \
  "s.saga_id, s.tenant, s.type, s.biz_id, s.request_hash, s.workflow, s.input::text, s.state, s.progress::text, " \
  "s.error_code, s.error_message, s.attention, (extract(epoch FROM s.created_at) * 1000)::bigint, "               \
  "(extract(epoch FROM s.updated_at) * 1000)::bigint, (extract(epoch FROM s.deadline) * 1000)::bigint, "          \
  "(extract(epoch FROM s.wake_at) * 1000)::bigint, s.version"

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
constexpr std::string_view sql_insert =
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
// One statement per round saves every other write of the round: a saga is
// written only while this instance ($1) holds it at the version the write
// names. An event is written where the payload is not NULL. $2 is now.
constexpr std::string_view sql_save =
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
constexpr std::string_view sql_by_id = "SELECT " TALLY_SAGA_COLUMNS " FROM saga s WHERE s.saga_id = $1";
// Due sagas whose holder's heartbeat lapsed, and this instance's own that
// have been due for a lease period ($4 ms) without a write: a claim whose
// COMMIT's answer was lost (a failover) leases sagas that no one drives,
// and this instance's heartbeat would keep them so for ever. Claimed again,
// the version bump fences off any driver of them left here, and their wake
// moves to now, so that they are not claimed again before another period.
constexpr std::string_view sql_claim =
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
constexpr std::string_view sql_counts =
    "SELECT state, sum(sagas)::bigint, 0::bigint FROM saga_state_count WHERE tenant = $1 GROUP BY state"
    " UNION ALL SELECT 'overdue', 0, count(*) FROM saga s WHERE s.tenant = $1 AND " TALLY_SAGA_OVERDUE("$2");
// Rows of sessions no longer running move into slot 0 (a pid taken again
// by a new session only adds to what its rows hold: counts are sums).
constexpr std::string_view sql_fold_counts =
    "WITH gone AS (DELETE FROM saga_state_count c WHERE c.slot <> 0"
    "  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.slot) RETURNING tenant, state, sagas)"
    " INSERT INTO saga_state_count AS c (tenant, state, slot, sagas)"
    " SELECT tenant, state, 0, sum(sagas) FROM gone GROUP BY tenant, state ORDER BY tenant, state"
    " ON CONFLICT (tenant, state, slot) DO UPDATE SET sagas = c.sagas + EXCLUDED.sagas";
// A page of sagas with attempts, in saga id (creation) order from $1 up
// to the first id of $2's millisecond, and of those the settled ones that
// settled before $2 lose their attempts.
constexpr std::string_view sql_compact =
    "WITH page AS (SELECT DISTINCT saga_id FROM saga_step WHERE saga_id > $1 AND saga_id < $2"
    "  ORDER BY saga_id LIMIT $4),"
    " settled AS (SELECT p.saga_id FROM page p JOIN saga s USING (saga_id)"
    "  WHERE s.state IN ('completed', 'failed', 'compensated') AND s.updated_at < to_timestamp($3::bigint / 1000.0)),"
    " gone AS (DELETE FROM saga_step st USING settled WHERE st.saga_id = settled.saga_id RETURNING st.saga_id)"
    " SELECT (SELECT count(*) FROM page) AS sagas_read, (SELECT count(*) FROM settled) AS sagas,"
    " (SELECT count(*) FROM gone) AS attempts, (SELECT max(saga_id) FROM page) AS last";
enum class compact_col { sagas_read, sagas, attempts, last };
constexpr std::string_view sql_refunds_of = "SELECT " TALLY_SAGA_COLUMNS
                                            " FROM saga s WHERE s.tenant = $1 AND s.type = 'refund'"
                                            " AND s.input->>'original_saga_id' = $2 ORDER BY s.saga_id";
constexpr std::string_view sql_attempts =
    "SELECT step, item, undo, attempt, shard, command::text, (extract(epoch FROM sent_at) * 1000)::bigint, outcome,"
    " code, (extract(epoch FROM answered_at) * 1000)::bigint FROM saga_step WHERE saga_id = $1"
    " ORDER BY sent_at, step, item, undo, attempt";
constexpr std::string_view sql_release_all = "DELETE FROM orchestrator_instance WHERE instance = $1";
constexpr std::string_view sql_release = "UPDATE saga SET lease_owner = NULL WHERE saga_id = $1 AND lease_owner = $2";
constexpr std::string_view sql_request_action =
    "WITH a AS (INSERT INTO saga_action (saga_id, action) VALUES ($1, $2) RETURNING id),"
    " due AS (UPDATE saga SET wake_at = LEAST(wake_at, to_timestamp($3::bigint / 1000.0))"
    "  WHERE saga_id = $1 AND state NOT IN ('completed', 'failed', 'compensated'))"
    " SELECT id, pg_notify($4, $1) FROM a";
constexpr std::string_view sql_take_actions =
    "UPDATE saga_action a SET status = 'taken' FROM saga s"
    " WHERE a.status = 'pending' AND a.saga_id = s.saga_id AND s.lease_owner = $1"
    " RETURNING a.id, a.saga_id, a.action";
constexpr std::string_view sql_return_action =
    "WITH a AS (UPDATE saga_action SET status = 'pending' WHERE id = $1 RETURNING saga_id),"
    " due AS (UPDATE saga s SET wake_at = LEAST(s.wake_at, to_timestamp($2::bigint / 1000.0)) FROM a"
    "  WHERE s.saga_id = a.saga_id AND s.state NOT IN ('completed', 'failed', 'compensated'))"
    " SELECT pg_notify($3, saga_id) FROM a";
constexpr std::string_view sql_finish_action =
    "WITH f AS (UPDATE saga_action SET status = 'finished', result = $2, finished_at = now() WHERE id = $1"
    "  RETURNING id)"
    " SELECT pg_notify($3, id::text) FROM f";
constexpr std::string_view sql_action_result = "SELECT result FROM saga_action WHERE id = $1 AND status = 'finished'";
// Heartbeats of instances gone for a day are forgotten on the way.
constexpr std::string_view sql_renew =
    "WITH gone AS (DELETE FROM orchestrator_instance"
    "  WHERE alive_until < to_timestamp($2::bigint / 1000.0) - interval '1 day' AND instance <> $1)"
    " INSERT INTO orchestrator_instance (instance, alive_until) VALUES ($1, to_timestamp($2::bigint / 1000.0))"
    " ON CONFLICT (instance) DO UPDATE SET alive_until = EXCLUDED.alive_until";

constexpr std::string_view saga_columns = TALLY_SAGA_COLUMNS;

#undef TALLY_SAGA_COLUMNS
#undef TALLY_COUNT_SAGAS
#undef TALLY_SAGA_OVERDUE

param ms_param(instant t) { return std::to_string(unix_ms(t)); }
param opt_ms(const std::optional<instant>& t) { return t ? ms_param(*t) : param{}; }
param opt_text(const std::string& s) { return s.empty() ? param{} : param{s}; }
std::string boolean(bool b) { return b ? "true" : "false"; }

// Reads rows of TALLY_SAGA_COLUMNS; a row this version cannot read is an error.
pg::error decode(const pg::result& r, std::vector<stored_saga>& out) {
  for (int i = 0; i < r.rows(); ++i) {
    stored_saga st;
    auto& s = st.s;
    s.id = r.text(i, 0);
    s.tenant = r.text(i, 1);
    auto type = saga_type_from(r.text(i, 2));
    s.biz_id = r.text(i, 3);
    st.request_hash = r.text(i, 4);
    s.workflow = r.text(i, 5);
    auto state = saga_state_from(r.text(i, 7));
    std::string problem;
    if (!type || !state || !find_workflow(s.workflow)) problem = "unknown type, state or workflow";
    try {
      s.input = input_from_json(nlohmann::json::parse(r.text(i, 6)));
      if (problem.empty()) progress_from_json(nlohmann::json::parse(r.text(i, 8)), s, problem);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (!problem.empty())
      return pg::error{make_error_code(pg::errc::query_failed), "", "saga " + s.id + ": " + problem};
    st.type = *type;
    s.state = *state;
    if (!r.is_null(i, 9)) s.error = saga_error{std::string(r.text(i, 9)), std::string(r.text(i, 10))};
    s.attention = r.is_null(i, 11) ? "" : std::string(r.text(i, 11));
    s.created = instant_from_unix_ms(r.int64(i, 12));
    st.updated = instant_from_unix_ms(r.int64(i, 13));
    s.deadline = instant_from_unix_ms(r.int64(i, 14));
    s.wake = r.is_null(i, 15) ? std::nullopt : std::optional<instant>(instant_from_unix_ms(r.int64(i, 15)));
    st.version = r.int64(i, 16);
    out.push_back(std::move(st));
  }
  return {};
}

std::string event_payload(const saga& s, instant now) {
  const auto* w = find_workflow(s.workflow);
  return w ? public_json(s, *w, now).dump() : "{}";
}

}  // namespace

asio::awaitable<pg::error> saga_store::query(std::string_view sql, std::vector<pg::param> params, pg::result& out) {
  pg::lease conn;
  if (auto err = co_await pool_.async_acquire(conn)) co_return err;
  co_return co_await conn->async_exec(sql, std::move(params), out, timeout_);
}

asio::awaitable<saga_store::create_result> saga_store::async_create(const saga& s, saga_type type,
                                                                    std::string request_hash, instant now) {
  create_result out;
  saga_write w{&s, 0, true, true, {}, type, request_hash};
  auto saved = co_await async_save(std::span(&w, 1), now);
  if ((out.error = saved.error)) co_return out;
  if (saved.versions.at(0) == 1) {
    out.outcome = created::inserted;
    out.saga = {s, type, std::move(request_hash), 1, now};
    co_return out;
  }
  co_return co_await async_existing(s.tenant, type, s.biz_id, std::move(request_hash));
}

asio::awaitable<saga_store::create_result> saga_store::async_existing(std::string tenant, saga_type type,
                                                                      std::string biz_id, std::string request_hash) {
  create_result out;
  saga_filter key{std::move(tenant), type, std::move(biz_id)};
  key.limit = 1;
  auto found = co_await async_list(std::move(key));
  if ((out.error = found.error)) co_return out;
  if (found.sagas.empty()) {
    // Only possible if the row vanished between the two statements.
    out.error = pg::error{make_error_code(pg::errc::query_failed), "", "saga key conflict without a saga"};
    co_return out;
  }
  out.saga = std::move(found.sagas.front());
  out.outcome = out.saga.request_hash == request_hash ? created::replayed : created::conflict;
  co_return out;
}

namespace {

// N column-wise text arrays, one element per row, in the shape unnest() takes.
template <std::size_t N>
struct text_columns {
  std::array<std::vector<param>, N> cols;
  void add(std::array<param, N> row) {
    for (std::size_t i = 0; i < N; ++i) cols[i].push_back(std::move(row[i]));
  }
  void append_to(std::vector<param>& params) const {
    for (const auto& c : cols) params.emplace_back(pg::array_literal(c));
  }
};

// The answered attempts of the writes in sql_save's eleven arrays ($13-$23).
void append_attempts(std::span<const saga_write* const> writes, std::vector<param>& params) {
  text_columns<11> c;
  for (const auto* w : writes)
    for (const auto& a : w->attempts)
      c.add({w->s->id, a.step, std::to_string(a.item), boolean(a.undo), std::to_string(a.attempt), a.shard, a.command,
             ms_param(a.sent), a.outcome ? param{*a.outcome} : param{}, opt_text(a.code), opt_ms(a.answered)});
  c.append_to(params);
}

param error_code_of(const saga& s) { return s.error ? param{s.error->code} : param{}; }
param error_message_of(const saga& s) { return s.error ? param{s.error->message} : param{}; }
// Where a terminal saga is written, nothing wakes it and nobody holds it.
param wake_of(const saga& s) { return is_terminal(s.state) ? param{} : opt_ms(s.wake); }
bool keeps_lease(const saga_write& w) { return w.keep_lease && !is_terminal(w.s->state); }

std::vector<param> create_params(std::span<const saga_write* const> creates, const std::string& owner, instant now) {
  text_columns<16> sagas;
  text_columns<2> events;
  for (const auto* w : creates) {
    const auto& s = *w->s;
    sagas.add({s.id, s.tenant, std::string(to_string(*w->create)), s.biz_id, w->request_hash, s.workflow,
               input_to_json(s.input).dump(), std::string(to_string(s.state)), progress_to_json(s).dump(),
               error_code_of(s), error_message_of(s), opt_text(s.attention), ms_param(s.created), ms_param(s.deadline),
               wake_of(s), boolean(keeps_lease(*w))});
    events.add({s.id, event_payload(s, now)});
  }
  std::vector<param> params{owner};
  sagas.append_to(params);
  events.append_to(params);
  return params;
}

std::vector<param> save_params(std::span<const saga_write* const> saves, const std::string& owner, instant now) {
  text_columns<10> sagas;
  for (const auto* w : saves) {
    const auto& s = *w->s;
    sagas.add({s.id, std::to_string(w->version), std::string(to_string(s.state)), progress_to_json(s).dump(),
               error_code_of(s), error_message_of(s), opt_text(s.attention), wake_of(s), boolean(keeps_lease(*w)),
               w->state_changed ? param{event_payload(s, now)} : param{}});
  }
  std::vector<param> params{owner, ms_param(now)};
  sagas.append_to(params);
  append_attempts(saves, params);
  return params;
}

}  // namespace

asio::awaitable<saga_store::save_result> saga_store::async_save(std::span<const saga_write> writes, instant now) {
  save_result out;
  if (writes.empty()) co_return out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  // A statement writes a saga at most once, so the n-th write of a saga in
  // this batch goes in round n. Each round is one statement for the creates
  // and one for the saves, in this order.
  std::vector<std::size_t> round_of(writes.size());
  {
    std::unordered_map<std::string_view, std::size_t> seen;
    for (std::size_t i = 0; i < writes.size(); ++i) round_of[i] = seen[writes[i].s->id]++;
  }
  const std::size_t rounds = *std::max_element(round_of.begin(), round_of.end()) + 1;
  struct statement_of_round {
    bool create = false;
    std::vector<const saga_write*> writes;
    std::size_t result = 0;  // its result's index
  };
  std::vector<statement_of_round> groups(2 * rounds);  // per round: creates, then saves
  for (std::size_t r = 0; r < rounds; ++r) groups[2 * r].create = true;
  for (std::size_t i = 0; i < writes.size(); ++i)
    groups[2 * round_of[i] + (writes[i].create ? 0 : 1)].writes.push_back(&writes[i]);

  std::vector<pg::statement> st{{pg::sql_begin, {}}};
  if (require_synchronous_standby_) st.push_back({pg::sql_require_synchronous_standby, {}});
  for (auto& g : groups) {
    if (g.writes.empty()) continue;
    g.result = st.size();
    st.push_back(g.create ? pg::statement{sql_insert, create_params(g.writes, owner_, now)}
                          : pg::statement{sql_save, save_params(g.writes, owner_, now)});
  }
  st.push_back({pg::sql_commit, {}});
  std::vector<pg::result> rs;
  if ((out.error = co_await conn->async_pipeline(st, rs, timeout_))) {
    co_await pg::async_rollback(*conn, timeout_);
    co_return out;
  }
  // Per write: 1 for a create that inserted its saga, the new version for
  // a save that wrote, else 0.
  out.versions.assign(writes.size(), 0);
  for (const auto& g : groups) {
    if (g.writes.empty()) continue;
    const auto& res = rs[g.result];
    std::unordered_map<std::string_view, std::int64_t> written;
    for (int row = 0; row < res.rows(); ++row) written[res.text(row, 0)] = g.create ? 1 : res.int64(row, 1);
    for (const auto* w : g.writes) {
      auto it = written.find(w->s->id);
      if (it != written.end()) out.versions[static_cast<std::size_t>(w - writes.data())] = it->second;
    }
  }
  co_return out;
}

asio::awaitable<saga_store::load_result> saga_store::async_claim(std::size_t limit, instant now) {
  load_result out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  std::vector<pg::statement> st{
      {pg::sql_begin, {}},
      {sql_claim, {owner_, ms_param(now), std::to_string(limit), std::to_string(lease_.count())}},
      {sql_take_actions, {owner_}},
      {pg::sql_commit, {}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await conn->async_pipeline(st, rs, timeout_))) {
    co_await pg::async_rollback(*conn, timeout_);
    co_return out;
  }
  if ((out.error = decode(rs[1], out.sagas))) co_return out;
  const auto& taken = rs[2];
  for (int i = 0; i < taken.rows(); ++i) {
    auto action = saga_action_from(taken.text(i, 2));
    if (action) out.actions.push_back({taken.int64(i, 0), std::string(taken.text(i, 1)), *action});
  }
  co_return out;
}

asio::awaitable<pg::error> saga_store::async_renew(instant now) {
  pg::result r;
  std::vector<param> params{owner_, ms_param(now + lease_)};
  co_return co_await query(sql_renew, std::move(params), r);
}

asio::awaitable<pg::error> saga_store::async_release(std::string saga_id) {
  pg::result r;
  std::vector<param> params{std::move(saga_id), owner_};
  co_return co_await query(sql_release, std::move(params), r);
}

asio::awaitable<saga_store::load_result> saga_store::async_get(std::string saga_id) {
  load_result out;
  pg::result r;
  std::vector<param> params{std::move(saga_id)};
  out.error = co_await query(sql_by_id, std::move(params), r);
  if (!out.error) out.error = decode(r, out.sagas);
  co_return out;
}

asio::awaitable<saga_store::load_result> saga_store::async_refunds_of(std::string tenant, std::string saga_id) {
  load_result out;
  pg::result r;
  std::vector<param> params{std::move(tenant), std::move(saga_id)};
  out.error = co_await query(sql_refunds_of, std::move(params), r);
  if (!out.error) out.error = decode(r, out.sagas);
  co_return out;
}

asio::awaitable<saga_store::counts_result> saga_store::async_counts(std::string tenant, instant now) {
  counts_result out;
  pg::result r;
  std::vector<param> params{std::move(tenant), std::to_string(unix_ms(now))};
  if ((out.error = co_await query(sql_counts, std::move(params), r))) co_return out;
  for (int i = 0; i < r.rows(); ++i) {
    if (auto state = saga_state_from(r.text(i, 0))) out.by_state[*state] = r.int64(i, 1);
    out.overdue += r.int64(i, 2);
  }
  co_return out;
}

asio::awaitable<saga_store::load_result> saga_store::async_list(saga_filter f) {
  load_result out;
  pg::result r;
  auto q = saga_list_query(f, saga_columns);
  out.error = co_await query(q.sql, std::move(q.params), r);
  if (!out.error) out.error = decode(r, out.sagas);
  co_return out;
}

asio::awaitable<pg::error> saga_store::async_fold_counts() {
  pg::result r;
  co_return co_await query(sql_fold_counts, {}, r);
}

asio::awaitable<saga_store::compact_result> saga_store::async_compact(instant before, std::string after,
                                                                      std::size_t limit) {
  compact_result out;
  pg::result r;
  std::vector<param> params{std::move(after), first_saga_id_at(before), ms_param(before), std::to_string(limit)};
  if ((out.error = co_await query(sql_compact, std::move(params), r))) co_return out;
  const pg::row<compact_col> row(r, 0);
  out.sagas_read = row.int64(compact_col::sagas_read);
  out.sagas = row.int64(compact_col::sagas);
  out.attempts = row.int64(compact_col::attempts);
  if (!row.is_null(compact_col::last)) out.last = row.text(compact_col::last);
  co_return out;
}

asio::awaitable<saga_store::attempts_result> saga_store::async_attempts(std::string saga_id) {
  attempts_result out;
  pg::result r;
  std::vector<param> params{std::move(saga_id)};
  if ((out.error = co_await query(sql_attempts, std::move(params), r))) co_return out;
  for (int i = 0; i < r.rows(); ++i) {
    step_attempt a;
    a.step = r.text(i, 0);
    a.item = static_cast<std::size_t>(r.int64(i, 1));
    a.undo = r.text(i, 2) == "t";
    a.attempt = static_cast<int>(r.int64(i, 3));
    a.shard = r.text(i, 4);
    a.command = r.text(i, 5);
    a.sent = instant_from_unix_ms(r.int64(i, 6));
    if (!r.is_null(i, 7)) a.outcome = std::string(r.text(i, 7));
    if (!r.is_null(i, 8)) a.code = r.text(i, 8);
    if (!r.is_null(i, 9)) a.answered = instant_from_unix_ms(r.int64(i, 9));
    out.attempts.push_back(std::move(a));
  }
  co_return out;
}

asio::awaitable<pg::error> saga_store::async_release_all() {
  pg::result r;
  std::vector<param> params{owner_};
  co_return co_await query(sql_release_all, std::move(params), r);
}

asio::awaitable<pg::error> saga_store::async_request_action(std::string saga_id, saga_action action, instant now,
                                                            std::int64_t& id) {
  pg::result r;
  std::vector<param> params{std::move(saga_id), std::string(to_string(action)), ms_param(now),
                            std::string(action_requested_channel)};
  auto err = co_await query(sql_request_action, std::move(params), r);
  if (!err) id = r.int64(0, 0);
  co_return err;
}

asio::awaitable<pg::error> saga_store::async_return_action(std::int64_t id, instant now) {
  pg::result r;
  std::vector<param> params{std::to_string(id), ms_param(now), std::string(action_requested_channel)};
  co_return co_await query(sql_return_action, std::move(params), r);
}

asio::awaitable<pg::error> saga_store::async_finish_action(std::int64_t id, engine::request_result result) {
  pg::result r;
  std::vector<param> params{std::to_string(id), std::string(to_string(result)), std::string(action_settled_channel)};
  co_return co_await query(sql_finish_action, std::move(params), r);
}

asio::awaitable<pg::error> saga_store::async_action_result(std::int64_t id,
                                                           std::optional<engine::request_result>& result) {
  pg::result r;
  std::vector<param> params{std::to_string(id)};
  auto err = co_await query(sql_action_result, std::move(params), r);
  result = !err && r.rows() == 1 ? request_result_from(r.text(0, 0)) : std::nullopt;
  co_return err;
}

std::string_view to_string(saga_action a) {
  switch (a) {
    case saga_action::confirm: return "confirm";
    case saga_action::cancel: return "cancel";
    case saga_action::abort: return "abort";
    case saga_action::retry: return "retry";
  }
  return "retry";
}

std::optional<saga_action> saga_action_from(std::string_view s) {
  for (auto a : {saga_action::confirm, saga_action::cancel, saga_action::abort, saga_action::retry})
    if (to_string(a) == s) return a;
  return std::nullopt;
}

std::string_view to_string(engine::request_result r) {
  switch (r) {
    case engine::request_result::done: return "done";
    case engine::request_result::already: return "already";
    case engine::request_result::invalid_state: return "invalid_state";
  }
  return "invalid_state";
}

std::optional<engine::request_result> request_result_from(std::string_view s) {
  for (auto r : {engine::request_result::done, engine::request_result::already, engine::request_result::invalid_state})
    if (to_string(r) == s) return r;
  return std::nullopt;
}

}  // namespace tally::orch
