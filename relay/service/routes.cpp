#include "relay/service/routes.hpp"

#include <span>

#include <nlohmann/json.hpp>

#include "common/http/route_table.hpp"
#include "common/http/routing.hpp"

namespace tally::relay {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

class router : public http::internal_router<router, route_context> {
 public:
  using internal_router::internal_router;

  // Under /v1/ everything needs the internal token.
  static std::span<const route> table() {
    using v = bhttp::verb;
    static const route routes[] = {
        {v::get, "/v1/consumers", &router::consumers},
    };
    return routes;
  }

 private:
  // Each consumer (a source to a sink): who holds it and how far behind it is.
  asio::awaitable<http::response> consumers(const http::request& req, const http::route_call&) {
    auto all = nlohmann::json::array();
    for (const auto& p : ctx_.pumps) {
      all.push_back({{"source", p->source_name()},
                     {"sink", p->sink_name()},
                     {"held", p->holder()},
                     {"lag_seconds", p->lag_seconds()}});
    }
    co_return http::json_response(req, 200, {{"consumers", std::move(all)}});
  }
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::internal_handler(std::make_shared<router>(ctx), ctx); }
http::body_limit_rule body_limits() { return http::internal_body_limits(router::table()); }

}  // namespace tally::relay
