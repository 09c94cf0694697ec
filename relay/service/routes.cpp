#include "relay/service/routes.hpp"

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/route_table.hpp"
#include "common/http/routing.hpp"

namespace tally::relay {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

class router;
using route = http::route_row<router, std::vector<std::string>>;  // the pattern's {parameters}

class router {
 public:
  explicit router(route_context& ctx) : ctx_(ctx) {}

  // Under /v1/ everything needs the internal token.
  static std::span<const route> table() {
    using v = bhttp::verb;
    static const route routes[] = {
        {v::get, "/v1/consumers", &router::consumers},
        {v::get, "/v1/admin/failpoints", &router::failpoints},
        {v::post, "/v1/admin/failpoints", &router::failpoints},
    };
    return routes;
  }

  asio::awaitable<http::response> dispatch(const http::request& req, const http::target&, const route& r,
                                           std::vector<std::string> args) {
    co_return co_await (this->*r.handle)(req, args);
  }

 private:
  // Each consumer (a source to a sink): who holds it and how far behind it is.
  asio::awaitable<http::response> consumers(const http::request& req, const std::vector<std::string>&) {
    auto all = nlohmann::json::array();
    for (const auto& p : ctx_.pumps) {
      all.push_back({{"source", p->source_name()},
                     {"sink", p->sink_name()},
                     {"held", p->holder()},
                     {"lag_seconds", p->lag_seconds()}});
    }
    co_return http::json_response(req, 200, {{"consumers", std::move(all)}});
  }

  asio::awaitable<http::response> failpoints(const http::request& req, const std::vector<std::string>&) {
    co_return http::failpoints_response(req);
  }

  route_context& ctx_;
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::internal_handler(std::make_shared<router>(ctx), ctx); }
http::body_limit_rule body_limits() { return http::body_limits_of(router::table()); }

}  // namespace tally::relay
