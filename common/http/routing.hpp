#pragma once
// What every service's router needs: the request target split into path
// segments and query, integer parameters, the internal bearer token check
// (constant time), JSON replies, and the unauthenticated service endpoints
// (/healthz, /readyz, /metrics) plus the failpoint admin endpoint.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/server.hpp"

namespace tally::http {

struct target {
  std::vector<std::string_view> path;  // segments, without empty ones
  std::string_view query;
};
target split_target(std::string_view t);
std::optional<std::string_view> query_param(std::string_view query, std::string_view name);
std::optional<std::int64_t> to_int(std::string_view s);

// `Authorization: Bearer <token>`, compared in constant time.
bool bearer_token_ok(const request& req, const std::string& token);

response json_response(const request& req, unsigned status, const nlohmann::json& body);
std::optional<nlohmann::json> parse_json_body(const request& req);

struct service_probes {
  std::function<bool()> ready;
  std::function<std::string()> metrics;  // Prometheus text
};
// A handler calling a shared router object: `co_await (*router)(request)`.
template <class Router>
handler shared_handler(std::shared_ptr<Router> router) {
  return [r = std::move(router)](request req) -> boost::asio::awaitable<response> {
    co_return co_await (*r)(std::move(req));
  };
}

// GET /healthz, /readyz, /metrics; nullopt for any other request.
std::optional<response> probe_response(const request& req, const target& t, const service_probes& probes);
// GET or POST {"spec": "..."} on /v1/admin/failpoints (the caller checks the token).
response failpoints_response(const request& req);

}  // namespace tally::http
