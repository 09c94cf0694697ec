#include "common/http/routing.hpp"

#include <openssl/crypto.h>

#include <stdexcept>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"

namespace tally::http {

namespace bhttp = boost::beast::http;

bool bearer_token_ok(const request& req, const std::string& token) {
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return false;
  std::string_view v(it->value().data(), it->value().size());
  constexpr std::string_view bearer = "Bearer ";
  if (!v.starts_with(bearer)) return false;
  v.remove_prefix(bearer.size());
  return v.size() == token.size() && CRYPTO_memcmp(v.data(), token.data(), token.size()) == 0;
}

response json_response(const request& req, unsigned status, const nlohmann::json& body) {
  return make_json_response(req, status, body.dump());
}

response bad_request(const request& req, std::string_view message) {
  return make_error_response(req, contract::error_code::invalid_request, message);
}

response not_found(const request& req, std::string_view message) {
  return make_error_response(req, contract::error_code::not_found, message);
}

std::optional<nlohmann::json> parse_json_body(const request& req) {
  auto j = nlohmann::json::parse(req.body(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<response> probe_response(const request& req, const target& t, const service_probes& probes) {
  if (t.path.size() != 1 || req.method() != bhttp::verb::get) return std::nullopt;
  const auto p = t.path[0];
  if (p == "healthz") return json_response(req, 200, {{"status", "ok"}});
  if (p == "readyz")
    return probes.ready() ? json_response(req, 200, {{"status", "ready"}})
                          : make_error_response(req, contract::error_code::unavailable, "not ready");
  if (p == "metrics") {
    response res = make_json_response(req, 200, probes.metrics());
    res.set(bhttp::field::content_type, "text/plain; version=0.0.4");
    return res;
  }
  return std::nullopt;
}

response failpoints_response(const request& req) {
  if (req.method() == bhttp::verb::get) return json_response(req, 200, {{"spec", failpoint::describe()}});
  if (req.method() != bhttp::verb::post) return not_found(req);
  auto body = parse_json_body(req);
  if (!body || !body->is_object() || !body->contains("spec") || !(*body)["spec"].is_string())
    return bad_request(req, "body must be {\"spec\": \"name=action,...\"}");
  try {
    failpoint::arm((*body)["spec"].get<std::string>());
  } catch (const std::invalid_argument& e) {
    return bad_request(req, e.what());
  }
  log::warn("failpoints armed", {{"spec", failpoint::describe()}});
  return json_response(req, 200, {{"spec", failpoint::describe()}});
}

}  // namespace tally::http
