#pragma once
// What every service's router needs: the request target (target.hpp), the
// internal bearer token check
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
#include "common/http/target.hpp"

namespace tally::http {

// `Authorization: Bearer <token>`, compared in constant time.
bool bearer_token_ok(const request& req, const std::string& token);

response json_response(const request& req, unsigned status, const nlohmann::json& body);
// The refusals every service makes, in the API's error shape (make_error_response).
response bad_request(const request& req, std::string_view message);                  // 400 invalid_request
response not_found(const request& req, std::string_view message = "no such route");  // 404 not_found
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
