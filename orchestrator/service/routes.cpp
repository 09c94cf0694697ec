#include "orchestrator/service/routes.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/contract/saga_id.hpp"
#include "common/http/route_table.hpp"
#include "common/http/routing.hpp"
#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"
#include "orchestrator/saga/codec.hpp"
#include "orchestrator/saga/request.hpp"

namespace tally::orch {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::request;
using http::response;
using nlohmann::json;

namespace {

constexpr std::int64_t max_wait_ms = 30000;
constexpr std::int64_t max_list_limit = 500;
// A saga request's canonical form: what the gateway accepted (at most its
// 64 KiB) with the tenant, type and hash added, without its white space.
constexpr std::size_t canonical_body_limit = 128 * 1024;

instant now() { return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()); }

using http::bad_request;
// Whatever its format: an id that is no saga id names no saga. Only a
// well-formed id is echoed (anything else may not even be UTF-8).
response no_such_saga(const request& req, std::string_view id) {
  return http::make_error_response(
      req, contract::error_code::not_found,
      contract::is_saga_id(id) ? "no saga " + std::string(id) : std::string("no such saga"));
}

json saga_json(const stored_saga& st) { return public_json(st.s, *find_workflow(st.s.workflow), st.updated); }

json attempt_json(const step_attempt& a) {
  return {{"step", a.step},
          {"item", a.item},
          {"compensation", a.undo},
          {"attempt", a.attempt},
          {"shard", a.shard},
          {"request", json::parse(a.command, nullptr, false)},
          {"outcome", a.outcome ? json(*a.outcome) : json(nullptr)},
          {"code", a.code.empty() ? json(nullptr) : json(a.code)},
          {"sent_at", to_rfc3339(a.sent)},
          {"answered_at", a.answered ? json(to_rfc3339(*a.answered)) : json(nullptr)}};
}

// One request matched to its route: its target, the pattern's
// {parameters}, and for the routes under /v1/tenants/{tenant}/ the tenant
// and the caller's wait.
struct call {
  const http::target& target;
  std::vector<std::string> args;
  std::string tenant;
  std::chrono::milliseconds wait{0};
};

class router : public http::internal_router<router, route_context, call> {
 public:
  using internal_router::internal_router;

  // Under /v1/ everything needs the internal token. The gateway starts
  // sagas with their canonical request (POST /v1/sagas, the tenant inside)
  // and names the caller's tenant in the path of everything else; the
  // collections under /v1/tenants/{tenant}/ take API.md bodies from
  // direct callers (benchmarks, tests).
  static std::span<const route> table() {
    using v = bhttp::verb;
    static const route routes[] = {
        {v::get, "/v1/workflows", &router::workflow_list},
        {v::post, "/v1/sagas", &router::start_canonical, canonical_body_limit},
        {v::post, "/v1/tenants/{tenant}/credits", &router::start},
        {v::post, "/v1/tenants/{tenant}/deductions", &router::start},
        {v::post, "/v1/tenants/{tenant}/refunds", &router::start},
        {v::post, "/v1/tenants/{tenant}/transfers", &router::start},
        {v::post, "/v1/tenants/{tenant}/batch-deductions", &router::start},
        {v::post, "/v1/tenants/{tenant}/deductions/{saga_id}/confirm", &router::act},
        {v::post, "/v1/tenants/{tenant}/deductions/{saga_id}/cancel", &router::act},
        {v::get, "/v1/tenants/{tenant}/sagas", &router::find},
        {v::get, "/v1/tenants/{tenant}/sagas/{saga_id}", &router::get},
        {v::get, "/v1/tenants/{tenant}/admin/sagas", &router::list},
        {v::get, "/v1/tenants/{tenant}/admin/sagas/counts", &router::counts},
        {v::get, "/v1/tenants/{tenant}/admin/sagas/{saga_id}", &router::get},
        {v::post, "/v1/tenants/{tenant}/admin/sagas/{saga_id}/retry", &router::act},
        {v::post, "/v1/tenants/{tenant}/admin/sagas/{saga_id}/abort", &router::act},
    };
    return routes;
  }

  asio::awaitable<response> dispatch(const request& req, const http::target& t, const route& r,
                                     std::vector<std::string> args) {
    call c{t, std::move(args), {}, {}};
    if (r.path.starts_with("/v1/tenants/")) {
      c.tenant = c.args[0];
      if (!validate::is_valid_id(c.tenant)) co_return bad_request(req, "bad tenant id");
    }
    if (r.path.starts_with("/v1/tenants/") || r.handle == &router::start_canonical) {
      auto wait = wait_of(t.query);
      if (!wait) co_return bad_request(req, "wait_ms must be an integer from 0 to 30000");
      c.wait = *wait;
    }
    co_return co_await (this->*r.handle)(req, c);
  }

 private:
  static std::optional<std::chrono::milliseconds> wait_of(std::string_view query) {
    auto text = http::query_param(query, "wait_ms");
    if (!text) return std::chrono::milliseconds(0);
    auto v = http::to_int(*text);
    if (!v || *v < 0 || *v > max_wait_ms) return std::nullopt;
    return std::chrono::milliseconds(*v);
  }

  // A saga resource: 200 when it has finished, else 202.
  static response saga_response(const request& req, const stored_saga& st, bool replayed) {
    auto res = http::json_response(req, replayed || is_terminal(st.s.state) ? 200 : 202, saga_json(st));
    if (replayed) res.set("Idempotent-Replayed", "true");
    return res;
  }

  static response failure(const request& req, const saga_runner::result& r) {
    switch (r.kind) {
      case saga_runner::outcome::conflict:
        return http::make_error_response(req, contract::error_code::idempotency_conflict, r.message);
      case saga_runner::outcome::not_found:
        return http::make_error_response(req, contract::error_code::not_found, r.message);
      case saga_runner::outcome::invalid:
        return http::make_error_response(req, contract::error_code::invalid_request, r.message);
      case saga_runner::outcome::invalid_state:
        return http::make_error_response(req, contract::error_code::invalid_state,
                                         r.message.empty() ? "the saga cannot do that in its state" : r.message);
      default:
        return http::make_error_response(req, contract::error_code::unavailable,
                                         r.message.empty() ? "unavailable; retry" : r.message);
    }
  }

  // After a write: the saga as it is now, or once it has finished (or waits
  // for its app's confirmation) within `wait`.
  asio::awaitable<stored_saga> settle(const stored_saga& st, std::chrono::milliseconds wait) {
    if (wait.count() == 0 || is_terminal(st.s.state) || st.s.state == saga_state::awaiting_confirmation) co_return st;
    auto r = co_await ctx_.runner.async_get(st.s.tenant, st.s.id, wait, true);
    co_return r.saga ? *r.saga : st;
  }

  asio::awaitable<response> workflow_list(const request& req, const call&) {
    auto all = json::array();
    for (const auto& w : workflows()) all.push_back(w);
    co_return http::json_response(req, 200, {{"workflows", std::move(all)}});
  }

  // POST /tenants/{t}/{collection}: a new saga of the collection's type,
  // from an API.md body.
  asio::awaitable<response> start(const request& req, const call& c) {
    const auto type = *contract::saga_type_of_collection(c.target.path[3]);
    auto body = http::parse_json_body(req);
    if (!body) co_return bad_request(req, "malformed JSON");
    auto parsed = saga_request_from_body(type, c.tenant, *body);
    if (auto* bad = std::get_if<invalid_request>(&parsed)) co_return bad_request(req, bad->message);
    co_return co_await run_start(req, std::move(std::get<saga_request>(parsed)), c.wait);
  }

  // POST /sagas: a new saga from the canonical request the gateway
  // validated (common/contract); only its shape is checked here.
  asio::awaitable<response> start_canonical(const request& req, const call& c) {
    auto body = http::parse_json_body(req);
    auto canonical = body ? contract::from_canonical_json(*body) : std::nullopt;
    if (!canonical) co_return bad_request(req, "not a canonical saga request");
    co_return co_await run_start(req, to_saga_request(std::move(*canonical)), c.wait);
  }

  asio::awaitable<response> run_start(const request& req, saga_request request, std::chrono::milliseconds wait) {
    auto r = co_await ctx_.runner.async_start(std::move(request));
    if (r.kind != saga_runner::outcome::created && r.kind != saga_runner::outcome::replayed) co_return failure(req, r);
    auto now = co_await settle(*r.saga, wait);
    co_return saga_response(req, now, r.kind == saga_runner::outcome::replayed);
  }

  // confirm | cancel | retry | abort, the path's last segment.
  asio::awaitable<response> act(const request& req, const call& c) {
    const auto& tenant = c.tenant;
    const auto& id = c.args[1];
    const auto action = *saga_action_from(c.target.path.back());
    const auto wait = c.wait;
    if (auto bad = contract::check_action_body(req.body())) co_return bad_request(req, bad->message);
    if (!contract::is_saga_id(id)) co_return no_such_saga(req, id);
    auto r = co_await ctx_.runner.async_act(tenant, std::string(id), action);
    if (r.kind == saga_runner::outcome::invalid_state && r.saga) {
      co_return http::make_error_response(req, contract::error_code::invalid_state,
                                          "saga " + r.saga->s.id + " is " + std::string(to_string(r.saga->s.state)) +
                                              ": cannot " + std::string(to_string(action)));
    }
    if (!r.saga || (r.kind != saga_runner::outcome::done && r.kind != saga_runner::outcome::already))
      co_return failure(req, r);
    auto now = co_await settle(*r.saga, wait);
    co_return http::json_response(req, 200, saga_json(now));
  }

  // One saga; under /admin/ with every attempt ("history").
  asio::awaitable<response> get(const request& req, const call& c) {
    const auto& tenant = c.tenant;
    const auto& id = c.args[1];
    const auto wait = c.wait;
    const bool history = c.target.path[3] == "admin";
    if (!contract::is_saga_id(id)) co_return no_such_saga(req, id);
    auto r = co_await ctx_.runner.async_get(tenant, std::string(id), wait);
    if (!r.saga) co_return failure(req, r);
    auto body = saga_json(*r.saga);
    auto refunded = co_await refunded_of(*r.saga);
    if (!refunded)
      co_return http::make_error_response(req, contract::error_code::unavailable, "the saga store is unavailable");
    if (!refunded->is_null()) body["refunded"] = std::move(*refunded);
    if (history) {
      auto attempts = co_await ctx_.store.async_attempts(std::string(id));
      if (attempts.error)
        co_return http::make_error_response(req, contract::error_code::unavailable, "the saga store is unavailable");
      auto all = json::array();
      for (const auto& a : attempts.attempts) all.push_back(attempt_json(a));
      body["history"] = std::move(all);
    }
    co_return http::json_response(req, wait.count() == 0 || is_terminal(r.saga->s.state) ? 200 : 202, body);
  }

  // A completed deduction, transfer or batch deduction: what its refunds
  // gave back per item; null for other sagas (a refund's own view says what
  // it gave back); nullopt when the store cannot say.
  asio::awaitable<std::optional<json>> refunded_of(const stored_saga& st) {
    if (st.s.state != saga_state::completed || !contract::is_refundable(st.type)) co_return json(nullptr);
    auto found = co_await ctx_.store.async_refunds_of(st.s.tenant, st.s.id);
    if (found.error) co_return std::nullopt;
    std::vector<saga_item> given;
    for (const auto& refund : found.sagas) {
      auto by = refunded_by(refund.s, *find_workflow(refund.s.workflow));
      given.insert(given.end(), by.begin(), by.end());
    }
    co_return refunded_json(refunded_of_original(st.s, st.type, given));
  }

  asio::awaitable<response> run_list(const request& req, saga_filter f) {
    auto r = co_await ctx_.store.async_list(f);
    if (r.error)
      co_return http::make_error_response(req, contract::error_code::unavailable, "the saga store is unavailable");
    auto sagas = json::array();
    for (const auto& st : r.sagas) sagas.push_back(saga_json(st));
    json out{{"sagas", std::move(sagas)}};
    out["next"] = r.sagas.size() == f.limit ? json(r.sagas.back().s.id) : json(nullptr);
    co_return http::json_response(req, 200, out);
  }

  // ?limit=, ?cursor= and ?order=, when present, into the filter; else the refusal.
  static std::optional<std::string> read_page(std::string_view query, saga_filter& f) {
    if (auto order = http::query_param(query, "order")) {
      if (*order != "newest" && *order != "oldest") return "order must be newest or oldest";
      f.oldest_first = *order == "oldest";
    }
    if (auto limit = http::query_param(query, "limit")) {
      auto v = http::to_int(*limit);
      if (!v || *v < 1 || *v > max_list_limit) return "limit must be from 1 to 500";
      f.limit = static_cast<std::size_t>(*v);
    }
    if (auto cursor = http::query_param(query, "cursor")) {
      if (!contract::is_saga_id(*cursor)) return "bad cursor";
      f.after = std::move(*cursor);
    }
    return std::nullopt;
  }

  // An RFC 3339 time parameter, when present, into `at`; false when it is not one.
  static bool read_time(std::string_view query, std::string_view name, std::optional<instant>& at) {
    auto text = http::query_param(query, name);
    if (!text) return true;
    auto ms = time::parse_rfc3339_ms(*text);
    if (ms) at = instant_from_unix_ms(*ms);
    return ms.has_value();
  }

  // ?type=, ?biz_id=, ?account=, ?created_after=, ?created_before=, ?limit=,
  // ?cursor= and ?order=, which both lists take, into the filter; else the
  // refusal.
  static std::optional<std::string> read_shared(std::string_view query, saga_filter& f) {
    if (auto account = http::query_param(query, "account")) {
      if (!validate::is_valid_id(*account)) return "bad account";
      f.account = std::move(*account);
    }
    if (!read_time(query, "created_after", f.created_after) || !read_time(query, "created_before", f.created_before))
      return "created_after and created_before must be RFC 3339 times in UTC (2026-12-01T10:00:00Z)";
    if (auto type = http::query_param(query, "type")) {
      f.type = saga_type_from(*type);
      if (!f.type) return "type must be credit, deduct, refund, transfer or batch_deduct";
    }
    if (auto biz = http::query_param(query, "biz_id")) {
      if (!validate::is_valid_id(*biz)) return "bad biz_id";
      f.biz_id = std::move(*biz);
    }
    return read_page(query, f);
  }

  // GET /sagas?type=&biz_id=&limit=&cursor=: an app finds its sagas by
  // business key, a page at a time like the operator's list.
  asio::awaitable<response> find(const request& req, const call& c) {
    saga_filter f{c.tenant};
    if (auto bad = read_shared(c.target.query, f)) co_return bad_request(req, *bad);
    co_return co_await run_list(req, std::move(f));
  }

  asio::awaitable<response> list(const request& req, const call& c) {
    const auto query = c.target.query;
    saga_filter f{c.tenant};
    if (auto bad = read_shared(query, f)) co_return bad_request(req, *bad);
    if (auto state = http::query_param(query, "state")) {
      f.state = saga_state_from(*state);
      if (!f.state) co_return bad_request(req, "unknown state");
    }
    if (auto older = http::query_param(query, "older_than_ms")) {
      auto v = http::to_int(*older);
      if (!v || *v < 0) co_return bad_request(req, "older_than_ms must be a non-negative integer");
      const auto before = now() - std::chrono::milliseconds(*v);
      f.created_before = f.created_before ? std::min(*f.created_before, before) : before;
    }
    if (auto overdue = http::query_param(query, "overdue")) {
      if (*overdue != "true" && *overdue != "false") co_return bad_request(req, "overdue must be true or false");
      if (*overdue == "true") f.overdue_at = now();
    }
    co_return co_await run_list(req, std::move(f));
  }

  // GET /admin/sagas/counts: every state's count, and how many are overdue.
  asio::awaitable<response> counts(const request& req, const call& c) {
    auto r = co_await ctx_.store.async_counts(c.tenant, now());
    if (r.error)
      co_return http::make_error_response(req, contract::error_code::unavailable, "the saga store is unavailable");
    json by_state = json::object();
    for (auto s : all_saga_states) by_state[std::string(to_string(s))] = r.by_state.contains(s) ? r.by_state[s] : 0;
    co_return http::json_response(req, 200, {{"counts", std::move(by_state)}, {"overdue", r.overdue}});
  }
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::internal_handler(std::make_shared<router>(ctx), ctx); }
http::body_limit_rule body_limits() { return http::internal_body_limits(router::table()); }

}  // namespace tally::orch
