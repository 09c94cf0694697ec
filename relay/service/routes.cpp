#include "relay/service/routes.hpp"

#include <nlohmann/json.hpp>

#include "common/http/routing.hpp"

namespace tally::relay {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

class router {
 public:
  explicit router(route_context& ctx) : ctx_(ctx), probes_{ctx.ready, [&m = ctx.metrics] { return m.render(); }} {}

  asio::awaitable<http::response> operator()(http::request req) {
    const auto t = http::split_target(std::string_view(req.target().data(), req.target().size()));
    if (auto probe = http::probe_response(req, t, probes_)) co_return std::move(*probe);
    if (t.path.empty() || t.path[0] != "v1") co_return http::make_error_response(req, 404, "not_found", "no such route");
    if (!http::bearer_token_ok(req, ctx_.internal_token))
      co_return http::make_error_response(req, 401, "unauthorized", "missing or wrong internal token");
    if (t.path.size() == 3 && t.path[1] == "admin" && t.path[2] == "failpoints") co_return http::failpoints_response(req);
    if (t.path.size() == 2 && t.path[1] == "consumers" && req.method() == bhttp::verb::get) {
      auto all = nlohmann::json::array();
      for (const auto& p : ctx_.pumps) {
        all.push_back({{"source", p->source_name()}, {"sink", p->sink_name()}, {"held", p->holder()},
                       {"lag_seconds", p->lag_seconds()}});
      }
      co_return http::json_response(req, 200, {{"consumers", std::move(all)}});
    }
    co_return http::make_error_response(req, 404, "not_found", "no such route");
  }

 private:
  route_context& ctx_;
  http::service_probes probes_;
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::shared_handler(std::make_shared<router>(ctx)); }

}  // namespace tally::relay
