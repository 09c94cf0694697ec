#include "common/http/routing.hpp"

#include <openssl/crypto.h>

#include <charconv>
#include <stdexcept>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"

namespace tally::http {

namespace bhttp = boost::beast::http;

target split_target(std::string_view t) {
  target out;
  auto q = t.find('?');
  if (q != std::string_view::npos) {
    out.query = t.substr(q + 1);
    t = t.substr(0, q);
  }
  while (!t.empty()) {
    if (t.front() == '/') {
      t.remove_prefix(1);
      continue;
    }
    auto slash = t.find('/');
    out.path.push_back(t.substr(0, slash));
    t = slash == std::string_view::npos ? std::string_view{} : t.substr(slash);
  }
  return out;
}

std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
  }
  return std::nullopt;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

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
                          : make_error_response(req, 503, "unavailable", "not ready");
  if (p == "metrics") {
    response res = make_json_response(req, 200, probes.metrics());
    res.set(bhttp::field::content_type, "text/plain; version=0.0.4");
    return res;
  }
  return std::nullopt;
}

response failpoints_response(const request& req) {
  if (req.method() == bhttp::verb::get) return json_response(req, 200, {{"spec", failpoint::describe()}});
  if (req.method() != bhttp::verb::post) return make_error_response(req, 404, "not_found", "no such route");
  auto body = parse_json_body(req);
  if (!body || !body->is_object() || !body->contains("spec") || !(*body)["spec"].is_string())
    return make_error_response(req, 400, "invalid_request", "body must be {\"spec\": \"name=action,...\"}");
  try {
    failpoint::arm((*body)["spec"].get<std::string>());
  } catch (const std::invalid_argument& e) {
    return make_error_response(req, 400, "invalid_request", e.what());
  }
  log::warn("failpoints armed", {{"spec", failpoint::describe()}});
  return json_response(req, 200, {{"spec", failpoint::describe()}});
}

}  // namespace tally::http
