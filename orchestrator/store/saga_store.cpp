#include "orchestrator/store/saga_store.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"
#include "orchestrator/saga/codec.hpp"
#include "orchestrator/store/saga_statements.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using pg::param;

using namespace saga_sql;

namespace {

param ms_param(instant t) { return std::to_string(unix_ms(t)); }
param opt_ms(const std::optional<instant>& t) { return t ? ms_param(*t) : param{}; }
param opt_text(const std::string& s) { return s.empty() ? param{} : param{s}; }
std::string boolean(bool b) { return b ? "true" : "false"; }

// Reads rows of TALLY_SAGA_COLUMNS; a row this version cannot read is an error.
pg::error decode(const pg::result& r, std::vector<stored_saga>& out) {
  using c = saga_col;
  for (auto row : pg::rows_of<c>(r)) {
    stored_saga st;
    auto& s = st.s;
    s.id = row.text(c::saga_id);
    s.tenant = row.text(c::tenant);
    auto type = saga_type_from(row.text(c::type));
    s.biz_id = row.text(c::biz_id);
    st.request_hash = row.text(c::request_hash);
    s.workflow = row.text(c::workflow);
    auto state = saga_state_from(row.text(c::state));
    std::string problem;
    if (!type || !state || !find_workflow(s.workflow)) problem = "unknown type, state or workflow";
    try {
      s.input = input_from_json(nlohmann::json::parse(row.text(c::input)));
      if (problem.empty()) progress_from_json(nlohmann::json::parse(row.text(c::progress)), s, problem);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (!problem.empty())
      return pg::error{make_error_code(pg::errc::query_failed), "", "saga " + s.id + ": " + problem};
    st.type = *type;
    s.state = *state;
    if (!row.is_null(c::error_code))
      s.error = saga_error{std::string(row.text(c::error_code)), std::string(row.text(c::error_message))};
    s.attention = row.is_null(c::attention) ? "" : std::string(row.text(c::attention));
    s.created = instant_from_unix_ms(row.int64(c::created_ms));
    st.updated = instant_from_unix_ms(row.int64(c::updated_ms));
    s.deadline = instant_from_unix_ms(row.int64(c::deadline_ms));
    s.wake =
        row.is_null(c::wake_ms) ? std::nullopt : std::optional<instant>(instant_from_unix_ms(row.int64(c::wake_ms)));
    st.version = row.int64(c::version);
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
    if (g.create)
      for (auto row : pg::rows_of<insert_col>(res)) written[row.text(insert_col::saga_id)] = 1;
    else
      for (auto row : pg::rows_of<save_col>(res)) written[row.text(save_col::saga_id)] = row.int64(save_col::version);
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
  using c = take_action_col;
  for (auto row : pg::rows_of<c>(rs[2])) {
    auto action = saga_action_from(row.text(c::action));
    if (action) out.actions.push_back({row.int64(c::id), std::string(row.text(c::saga_id)), *action});
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
  using c = counts_col;
  for (auto row : pg::rows_of<c>(r)) {
    if (auto state = saga_state_from(row.text(c::state))) out.by_state[*state] = row.int64(c::sagas);
    out.overdue += row.int64(c::overdue);
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
  using c = attempt_col;
  for (auto row : pg::rows_of<c>(r)) {
    step_attempt a;
    a.step = row.text(c::step);
    a.item = static_cast<std::size_t>(row.int64(c::item));
    a.undo = row.boolean(c::undo);
    a.attempt = static_cast<int>(row.int64(c::attempt));
    a.shard = row.text(c::shard);
    a.command = row.text(c::command);
    a.sent = instant_from_unix_ms(row.int64(c::sent_ms));
    if (!row.is_null(c::outcome)) a.outcome = std::string(row.text(c::outcome));
    if (!row.is_null(c::code)) a.code = row.text(c::code);
    if (!row.is_null(c::answered_ms)) a.answered = instant_from_unix_ms(row.int64(c::answered_ms));
    out.attempts.push_back(std::move(a));
  }
  co_return out;
}

asio::awaitable<pg::error> saga_store::async_release_all() {
  pg::result r;
  std::vector<param> params{owner_};
  co_return co_await query(sql_release_all, std::move(params), r);
}

}  // namespace tally::orch
