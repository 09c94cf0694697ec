// Actions on sagas (saga_store.hpp): an app's or operator's request queued
// for the instance that holds the saga, woken by a notification, and its
// result; and the names they are stored under.
#include "common/pg/rows.hpp"
#include "orchestrator/store/saga_statements.hpp"
#include "orchestrator/store/saga_store.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using pg::param;
using namespace saga_sql;

asio::awaitable<pg::error> saga_store::async_request_action(std::string saga_id, saga_action action, instant now,
                                                            std::int64_t& id) {
  pg::result r;
  std::vector<param> params{std::move(saga_id), std::string(to_string(action)), std::to_string(unix_ms(now)),
                            std::string(action_requested_channel)};
  auto err = co_await query(sql_request_action, std::move(params), r);
  if (!err) id = pg::row<request_action_col>(r, 0).int64(request_action_col::id);
  co_return err;
}

asio::awaitable<pg::error> saga_store::async_return_action(std::int64_t id, instant now) {
  pg::result r;
  std::vector<param> params{std::to_string(id), std::to_string(unix_ms(now)), std::string(action_requested_channel)};
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
  result = !err && r.rows() == 1 ? request_result_from(pg::row<action_result_col>(r, 0).text(action_result_col::result))
                                 : std::nullopt;
  co_return err;
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
