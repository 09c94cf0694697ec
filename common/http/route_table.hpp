#pragma once
// A service's routes as data: each row a method, a path pattern
// (route_match.hpp: "/v1/accounts/{tenant}/{account_id}"), how much body it
// reads, and whatever the service keeps beside (its handler, who may call
// it). The first row whose method and pattern match wins, so a service's
// whole surface reads in one screen and can be listed.
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "common/http/route_match.hpp"
#include "common/http/routing.hpp"

namespace tally::http {

// How much body a route reads: bytes, or nullopt for the server's
// body_limit (server_options). Unless its row says otherwise a GET reads
// none and any other method up to the server's limit.
using route_body_limit = std::optional<std::size_t>;
constexpr route_body_limit default_body_limit(boost::beast::http::verb method) {
  return method == boost::beast::http::verb::get ? route_body_limit(0) : std::nullopt;
}
// A POST that only names an action (`{}` or nothing).
inline constexpr std::size_t action_body_limit = 1024;

// The row most services use: a handler on their router, given the request
// and what the router makes of the match (`Call`).
template <class Router, class Call>
struct route_row {
  using handler_type = boost::asio::awaitable<response> (Router::*)(const request&, const Call&);
  route_row(boost::beast::http::verb m, std::string_view p, handler_type h)
      : method(m), path(p), handle(h), body_limit(default_body_limit(m)) {}
  route_row(boost::beast::http::verb m, std::string_view p, handler_type h, route_body_limit limit)
      : method(m), path(p), handle(h), body_limit(limit) {}

  boost::beast::http::verb method;
  std::string_view path;
  handler_type handle;
  route_body_limit body_limit;
};

template <class Route>
struct route_found {
  const Route* route = nullptr;   // null: no row matches
  std::vector<std::string> args;  // the pattern's {parameters}, in order
};

// Route: any struct with `method` (a beast verb) and `path` (a pattern).
template <class Route>
route_found<Route> find_route(std::span<const Route> table, boost::beast::http::verb method,
                              const std::vector<std::string>& path) {
  for (const auto& r : table) {
    if (r.method != method) continue;
    if (auto args = match_path(r.path, path)) return {&r, std::move(*args)};
  }
  return {};
}

// [{"method", "path", "body_limit"}, ...] in the table's order; a null
// body_limit is the server's.
template <class Route>
nlohmann::json list_routes(std::span<const Route> table) {
  auto out = nlohmann::json::array();
  for (const auto& r : table) {
    out.push_back({{"method", std::string(boost::beast::http::to_string(r.method))},
                   {"path", r.path},
                   {"body_limit", r.body_limit ? nlohmann::json(*r.body_limit) : nlohmann::json(nullptr)}});
  }
  return out;
}

// The server's body_limit_rule for a table: the limit of the row a
// request's header matches; nullopt (the server's) when none does.
template <class Route>
body_limit_rule body_limits_of(std::span<const Route> table) {
  return [table](const request& header) -> route_body_limit {
    const auto t = split_target(std::string_view(header.target().data(), header.target().size()));
    const auto found = find_route(table, header.method(), t.path);
    return found.route ? found.route->body_limit : std::nullopt;
  };
}

// A route every internal service (shards, orchestrator, relay) answers
// beside its own table, under /v1/ and behind the internal token.
struct internal_route {
  boost::beast::http::verb method;
  std::string_view path;
  response (*handle)(const request&);
  route_body_limit body_limit;
};

// GET /v1/admin/failpoints lists the armed failpoints, POST arms them
// (failpoints_response).
inline std::span<const internal_route> internal_routes() {
  using v = boost::beast::http::verb;
  static const internal_route routes[] = {
      {v::get, "/v1/admin/failpoints", &failpoints_response, default_body_limit(v::get)},
      {v::post, "/v1/admin/failpoints", &failpoints_response, default_body_limit(v::post)},
  };
  return routes;
}

// body_limits_of for an internal service: its table, then internal_routes().
template <class Route>
body_limit_rule internal_body_limits(std::span<const Route> table) {
  return [table](const request& header) -> route_body_limit {
    const auto t = split_target(std::string_view(header.target().data(), header.target().size()));
    if (const auto own = find_route(table, header.method(), t.path); own.route) return own.route->body_limit;
    const auto shared = find_route(internal_routes(), header.method(), t.path);
    return shared.route ? shared.route->body_limit : std::nullopt;
  };
}

// What the internal services (shards, orchestrator, relay) do with every
// request: the probes without a token, then under /v1/ the internal token,
// then the table and internal_routes() (the table first: the services'
// own routes carry the load); `dispatch(route, args)` runs the matched row
// of the table.
template <class Route, class Dispatch>
boost::asio::awaitable<response> serve_internal(const request& req, const target& t, const service_probes& probes,
                                                const std::string& token, std::span<const Route> table,
                                                Dispatch dispatch) {
  if (auto probe = probe_response(req, t, probes)) co_return std::move(*probe);
  if (t.path.empty() || t.path[0] != "v1") co_return not_found(req);
  if (!bearer_token_ok(req, token))
    co_return make_error_response(req, contract::error_code::unauthorized, "missing or wrong internal token");
  auto found = find_route(table, req.method(), t.path);
  if (found.route) co_return co_await dispatch(*found.route, std::move(found.args));
  if (const auto shared = find_route(internal_routes(), req.method(), t.path); shared.route)
    co_return shared.route->handle(req);
  co_return not_found(req);
}

// What the route context of an internal service starts with: what
// serve_internal answers before the service's own routes.
struct internal_context {
  service_probes probes;
  std::string internal_token;
};

// What a route of an internal service is given: the request's target and
// the pattern's {parameters}, in order.
struct route_call {
  const http::target& target;
  std::vector<std::string> args;
};

// The base of an internal service's router (`class router : public
// internal_router<router, route_context>`): it keeps the route context and
// hands a matched row its route_call. A router whose rows take another
// Call makes it in a `dispatch` of its own, with the signature of this one.
template <class Router, class Context, class Call = route_call>
class internal_router {
 public:
  using route = route_row<Router, Call>;

  explicit internal_router(Context& ctx) : ctx_(ctx) {}

  boost::asio::awaitable<response> dispatch(const request& req, const target& t, const route& r,
                                            std::vector<std::string> args) {
    // Named: GCC 12 miscompiles a braced temporary in a co_await operand.
    const Call c{t, std::move(args)};
    co_return co_await (static_cast<Router*>(this)->*r.handle)(req, c);
  }

 protected:
  Context& ctx_;
};

// The handler of an internal service's router: serve_internal with the
// context's probes and token and Router::table(); the matched row goes to
// `router.dispatch(request, target, row, args)` (internal_router's, or the
// router's own). The context outlives it.
template <class Router>
handler internal_handler(std::shared_ptr<Router> router, const internal_context& ctx) {
  return [router = std::move(router), &ctx](request req) -> boost::asio::awaitable<response> {
    const auto t = split_target(std::string_view(req.target().data(), req.target().size()));
    co_return co_await serve_internal(
        req, t, ctx.probes, ctx.internal_token, Router::table(),
        [&](const auto& row, std::vector<std::string> args) { return router->dispatch(req, t, row, std::move(args)); });
  };
}

}  // namespace tally::http
