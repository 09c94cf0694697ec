#include "orchestrator/store/saga_store.hpp"

#include <nlohmann/json.hpp>

#include "common/pg/transaction.hpp"
#include "orchestrator/saga/codec.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using pg::param;

namespace {

// The columns every read returns, in the order decode() reads them.
#define TALLY_SAGA_COLUMNS                                                                                      \
  "s.saga_id, s.tenant, s.type, s.biz_id, s.request_hash, s.workflow, s.input::text, s.state, s.progress::text, " \
  "s.error_code, s.error_message, s.attention, (extract(epoch FROM s.created_at) * 1000)::bigint, "             \
  "(extract(epoch FROM s.updated_at) * 1000)::bigint, (extract(epoch FROM s.deadline) * 1000)::bigint, "        \
  "(extract(epoch FROM s.wake_at) * 1000)::bigint, s.version"

constexpr std::string_view sql_insert =
    "WITH ins AS ("
    " INSERT INTO saga (saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, error_code,"
    "  error_message, attention, created_at, updated_at, deadline, wake_at, lease_owner, lease_until, version)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9::jsonb, $10, $11, $12, to_timestamp($13::bigint / 1000.0),"
    "  to_timestamp($13::bigint / 1000.0), to_timestamp($14::bigint / 1000.0), to_timestamp($15::bigint / 1000.0),"
    "  $16, to_timestamp($17::bigint / 1000.0), 1)"
    " ON CONFLICT (tenant, type, biz_id) DO NOTHING RETURNING tenant, saga_id),"
    " ev AS (INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)"
    "  SELECT tenant, saga_id, 1, 'saga.state', $18::jsonb FROM ins)"
    " SELECT saga_id FROM ins";
constexpr std::string_view sql_by_key =
    "SELECT " TALLY_SAGA_COLUMNS " FROM saga s WHERE s.tenant = $1 AND s.type = $2 AND s.biz_id = $3";
constexpr std::string_view sql_by_id = "SELECT " TALLY_SAGA_COLUMNS " FROM saga s WHERE s.saga_id = $1";
constexpr std::string_view sql_save =
    "WITH u AS ("
    " UPDATE saga SET state = $3, progress = $4::jsonb, error_code = $5, error_message = $6, attention = $7,"
    "  updated_at = to_timestamp($8::bigint / 1000.0), wake_at = to_timestamp($9::bigint / 1000.0),"
    "  lease_owner = CASE WHEN $10::boolean THEN lease_owner END,"
    "  lease_until = CASE WHEN $10::boolean THEN lease_until END, version = version + 1"
    " WHERE saga_id = $1 AND version = $2 AND lease_owner = $11 RETURNING tenant, saga_id, version),"
    " ev AS (INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload)"
    "  SELECT tenant, saga_id, version, 'saga.state', $12::jsonb FROM u WHERE $13::boolean),"
    " st AS (INSERT INTO saga_step (saga_id, step, item, undo, attempt, shard, command, sent_at, outcome, code,"
    "  answered_at)"
    "  SELECT u.saga_id, a.step, a.item, a.undo, a.attempt, a.shard, a.command::jsonb, to_timestamp(a.sent / 1000.0),"
    "   a.outcome, a.code, to_timestamp(a.answered / 1000.0)"
    "  FROM u, unnest($14::text[], $15::int[], $16::boolean[], $17::int[], $18::text[], $19::text[], $20::bigint[],"
    "   $21::text[], $22::text[], $23::bigint[])"
    "   AS a(step, item, undo, attempt, shard, command, sent, outcome, code, answered)"
    "  ON CONFLICT (saga_id, step, item, undo, attempt) DO UPDATE"
    "   SET outcome = EXCLUDED.outcome, code = EXCLUDED.code, answered_at = EXCLUDED.answered_at)"
    " SELECT version FROM u";
constexpr std::string_view sql_claim =
    "UPDATE saga s SET lease_owner = $1, lease_until = to_timestamp($2::bigint / 1000.0), version = s.version + 1"
    " FROM (SELECT saga_id FROM saga WHERE wake_at <= to_timestamp($3::bigint / 1000.0)"
    "  AND (lease_owner IS NULL OR lease_until < to_timestamp($3::bigint / 1000.0))"
    "  ORDER BY wake_at LIMIT $4 FOR UPDATE SKIP LOCKED) due"
    " WHERE s.saga_id = due.saga_id RETURNING " TALLY_SAGA_COLUMNS;
constexpr std::string_view sql_renew =
    "UPDATE saga SET lease_until = to_timestamp($2::bigint / 1000.0) WHERE lease_owner = $1";

#undef TALLY_SAGA_COLUMNS

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

asio::awaitable<saga_store::create_result> saga_store::async_create(const saga& s, saga_type type,
                                                                    std::string request_hash, instant now) {
  create_result out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  const bool held = !is_terminal(s.state);
  std::vector<pg::statement> insert{
      {sql_insert,
       {s.id, s.tenant, std::string(to_string(type)), s.biz_id, request_hash, s.workflow,
        input_to_json(s.input).dump(), std::string(to_string(s.state)), progress_to_json(s).dump(),
        s.error ? param{s.error->code} : param{}, s.error ? param{s.error->message} : param{}, opt_text(s.attention),
        ms_param(s.created), ms_param(s.deadline), opt_ms(s.wake), held ? param{owner_} : param{},
        held ? ms_param(now + lease_) : param{}, event_payload(s, now)}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await conn->async_pipeline(insert, rs, timeout_))) co_return out;
  if (rs[0].rows() == 1) {
    out.outcome = created::inserted;
    out.saga = {s, type, std::move(request_hash), 1, now};
    co_return out;
  }
  std::vector<pg::statement> lookup{{sql_by_key, {s.tenant, std::string(to_string(type)), s.biz_id}}};
  if ((out.error = co_await conn->async_pipeline(lookup, rs, timeout_))) co_return out;
  std::vector<stored_saga> found;
  if ((out.error = decode(rs[0], found))) co_return out;
  if (found.empty()) {
    // Only possible if the row vanished between the two statements.
    out.error = pg::error{make_error_code(pg::errc::query_failed), "", "saga key conflict without a saga"};
    co_return out;
  }
  out.saga = std::move(found.front());
  out.outcome = out.saga.request_hash == request_hash ? created::replayed : created::conflict;
  co_return out;
}

asio::awaitable<saga_store::save_result> saga_store::async_save(std::span<const saga_write> writes, instant now) {
  save_result out;
  if (writes.empty()) co_return out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  std::vector<pg::statement> st;
  st.reserve(writes.size() + 2);
  st.push_back({pg::sql_begin, {}});
  for (const auto& w : writes) {
    const auto& s = *w.s;
    std::vector<std::string> step, undo, shard, command;
    std::vector<std::int64_t> item, attempt, sent;
    std::vector<param> outcome, code, answered;
    for (const auto& a : w.attempts) {
      step.push_back(a.step);
      item.push_back(static_cast<std::int64_t>(a.item));
      undo.push_back(boolean(a.undo));
      attempt.push_back(a.attempt);
      shard.push_back(a.shard);
      command.push_back(a.command);
      sent.push_back(unix_ms(a.sent));
      outcome.push_back(a.outcome ? param{*a.outcome} : param{});
      code.push_back(opt_text(a.code));
      answered.push_back(opt_ms(a.answered));
    }
    const bool keep = w.keep_lease && !is_terminal(s.state);
    st.push_back({sql_save,
                  {s.id, std::to_string(w.version), std::string(to_string(s.state)), progress_to_json(s).dump(),
                   s.error ? param{s.error->code} : param{}, s.error ? param{s.error->message} : param{},
                   opt_text(s.attention), ms_param(now), is_terminal(s.state) ? param{} : opt_ms(s.wake),
                   boolean(keep), owner_, w.state_changed ? event_payload(s, now) : "{}", boolean(w.state_changed),
                   pg::array_literal(step), pg::array_literal(item), pg::array_literal(undo),
                   pg::array_literal(attempt), pg::array_literal(shard), pg::array_literal(command),
                   pg::array_literal(sent), pg::array_literal(outcome), pg::array_literal(code),
                   pg::array_literal(answered)}});
  }
  st.push_back({pg::sql_commit, {}});
  std::vector<pg::result> rs;
  if ((out.error = co_await conn->async_pipeline(st, rs, timeout_))) {
    co_await pg::async_rollback(*conn, timeout_);
    co_return out;
  }
  for (std::size_t i = 0; i < writes.size(); ++i)
    out.versions.push_back(rs[i + 1].rows() == 1 ? rs[i + 1].int64(0, 0) : 0);
  co_return out;
}

asio::awaitable<saga_store::load_result> saga_store::async_claim(std::size_t limit, instant now) {
  load_result out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  pg::result r;
  std::vector<param> params{owner_, ms_param(now + lease_), ms_param(now), std::to_string(limit)};
  out.error = co_await conn->async_exec(sql_claim, std::move(params), r, timeout_);
  if (!out.error) out.error = decode(r, out.sagas);
  co_return out;
}

asio::awaitable<pg::error> saga_store::async_renew(instant now, std::int64_t& held) {
  pg::lease conn;
  if (auto err = co_await pool_.async_acquire(conn)) co_return err;
  pg::result r;
  std::vector<param> params{owner_, ms_param(now + lease_)};
  auto err = co_await conn->async_exec(sql_renew, std::move(params), r, timeout_);
  if (!err) held = r.affected_rows();
  co_return err;
}

asio::awaitable<saga_store::load_result> saga_store::async_get(std::string saga_id) {
  load_result out;
  pg::lease conn;
  if ((out.error = co_await pool_.async_acquire(conn))) co_return out;
  pg::result r;
  std::vector<param> params{std::move(saga_id)};
  out.error = co_await conn->async_exec(sql_by_id, std::move(params), r, timeout_);
  if (!out.error) out.error = decode(r, out.sagas);
  co_return out;
}

}  // namespace tally::orch
