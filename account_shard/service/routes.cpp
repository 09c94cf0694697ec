#include "account_shard/service/routes.hpp"

#include <openssl/crypto.h>

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"
#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::request;
using http::response;

namespace {

constexpr std::size_t max_batch_commands = 1000;

struct target {
  std::vector<std::string_view> path;  // segments
  std::string_view query;
};

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

bool token_ok(const request& req, const std::string& token) {
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return false;
  std::string_view v(it->value().data(), it->value().size());
  constexpr std::string_view bearer = "Bearer ";
  if (!v.starts_with(bearer)) return false;
  v.remove_prefix(bearer.size());
  return v.size() == token.size() && CRYPTO_memcmp(v.data(), token.data(), token.size()) == 0;
}

response json(const request& req, unsigned status, const nlohmann::json& body) {
  return http::make_json_response(req, status, body.dump());
}

response bad_request(const request& req, std::string_view message) {
  return http::make_error_response(req, 400, "invalid_request", message);
}

response unavailable(const request& req, std::string_view code = "unavailable") {
  return http::make_error_response(req, 503, code, "the shard cannot decide now; resend the same key");
}

response from_query(const request& req, const query_result& r) {
  if (r.error) {
    log::warn("query failed", {{"error", r.error.message}});
    return unavailable(req);
  }
  if (!r.found) return http::make_error_response(req, 404, "not_found", "no such object");
  return json(req, 200, r.body);
}

std::string result_json(const submit_result& r) {
  switch (r.status) {
    case submit_status::decided:
      return reply_json(r.decision);
    case submit_status::unavailable:
      return R"({"status":"unavailable","code":"unavailable"})";
    case submit_status::outcome_unknown:
      return R"({"status":"unavailable","code":"outcome_unknown"})";
  }
  return "{}";
}

std::optional<nlohmann::json> parse_body(const request& req) {
  auto j = nlohmann::json::parse(req.body(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

class router {
 public:
  explicit router(route_context& ctx) : ctx_(ctx) {}

  asio::awaitable<response> operator()(request req) {
    auto t = split_target(std::string_view(req.target().data(), req.target().size()));
    const auto& p = t.path;
    auto method = req.method();
    if (p.size() == 1 && method == bhttp::verb::get) {
      if (p[0] == "healthz") co_return json(req, 200, {{"status", "ok"}});
      if (p[0] == "readyz")
        co_return ctx_.ready() ? json(req, 200, {{"status", "ready"}})
                               : http::make_error_response(req, 503, "unavailable", "not ready");
      if (p[0] == "metrics") {
        response res = http::make_json_response(req, 200, ctx_.metrics.render());
        res.set(bhttp::field::content_type, "text/plain; version=0.0.4");
        co_return res;
      }
    }
    if (p.empty() || p[0] != "v1") co_return http::make_error_response(req, 404, "not_found", "no such route");
    if (!token_ok(req, ctx_.internal_token))
      co_return http::make_error_response(req, 401, "unauthorized", "missing or wrong internal token");

    if (method == bhttp::verb::post && p.size() == 2 && p[1] == "commands") co_return co_await single(req);
    if (method == bhttp::verb::post && p.size() == 2 && p[1] == "batch") co_return co_await batch(req);
    if (p.size() >= 4 && p[1] == "accounts") {
      std::string tenant(p[2]), account(p[3]);
      if (!is_valid_id(tenant) || !is_valid_id(account)) co_return bad_request(req, "bad tenant or account id");
      if (p.size() == 4 && method == bhttp::verb::get) co_return from_query(req, co_await ctx_.reads.async_account(tenant, account));
      if (p.size() == 5 && method == bhttp::verb::get && p[4] == "entries") {
        auto after = to_int(query_param(t.query, "after").value_or("0"));
        auto limit = to_int(query_param(t.query, "limit").value_or("100"));
        if (!after || *after < 0) co_return bad_request(req, "after must be a ledger sequence number");
        if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
        co_return from_query(req, co_await ctx_.reads.async_entries(tenant, account, *after, static_cast<int>(*limit)));
      }
      if (p.size() == 5 && method == bhttp::verb::get && p[4] == "holds")
        co_return from_query(req, co_await ctx_.reads.async_holds(tenant, account));
      if (p.size() == 5 && method == bhttp::verb::post && (p[4] == "freeze" || p[4] == "unfreeze")) {
        std::string status = p[4] == "freeze" ? "frozen" : "active";
        auto r = co_await ctx_.reads.async_set_status(tenant, account, status, ctx_.writer_epoch());
        if (r.found && !r.error) log::warn("account status set by operator", {{"account_id", account}, {"status", status}});
        co_return from_query(req, r);
      }
    }
    if (p.size() == 6 && p[1] == "operations" && method == bhttp::verb::get) {
      for (std::size_t i = 2; i < 6; ++i)
        if (!is_valid_id(p[i])) co_return bad_request(req, "bad id in path");
      co_return from_query(req, co_await ctx_.reads.async_operation(std::string(p[2]), std::string(p[3]),
                                                                    std::string(p[4]), std::string(p[5])));
    }
    if (p.size() == 3 && p[1] == "holds" && p[2] == "old" && method == bhttp::verb::get) {
      auto older = to_int(query_param(t.query, "older_than_ms").value_or("60000"));
      auto limit = to_int(query_param(t.query, "limit").value_or("100"));
      if (!older || *older < 0) co_return bad_request(req, "older_than_ms must be a non-negative integer");
      if (!limit || *limit < 1 || *limit > 1000) co_return bad_request(req, "limit must be between 1 and 1000");
      co_return from_query(req, co_await ctx_.reads.async_old_holds(*older, static_cast<int>(*limit)));
    }
    if (p.size() == 2 && p[1] == "reconciliation" && method == bhttp::verb::get) {
      std::optional<std::int64_t> watermark;
      if (auto w = query_param(t.query, "watermark")) {
        watermark = to_int(*w);
        if (!watermark || *watermark < 0) co_return bad_request(req, "watermark must be a ledger sequence number");
      }
      auto freeze = query_param(t.query, "freeze").value_or("true");
      if (freeze != "true" && freeze != "false") co_return bad_request(req, "freeze must be true or false");
      co_return from_query(req, co_await ctx_.reads.async_reconcile(watermark, freeze == "true", ctx_.writer_epoch()));
    }
    if (p.size() == 3 && p[1] == "admin" && p[2] == "failpoints") {
      if (method == bhttp::verb::get) co_return json(req, 200, {{"spec", failpoint::describe()}});
      if (method == bhttp::verb::post) {
        auto body = parse_body(req);
        if (!body || !body->is_object() || !body->contains("spec") || !(*body)["spec"].is_string())
          co_return bad_request(req, "body must be {\"spec\": \"name=action,...\"}");
        try {
          failpoint::arm((*body)["spec"].get<std::string>());
        } catch (const std::invalid_argument& e) {
          co_return bad_request(req, e.what());
        }
        log::warn("failpoints armed", {{"spec", failpoint::describe()}});
        co_return json(req, 200, {{"spec", failpoint::describe()}});
      }
    }
    co_return http::make_error_response(req, 404, "not_found", "no such route");
  }

 private:
  asio::awaitable<response> single(const request& req) {
    auto body = parse_body(req);
    if (!body) co_return bad_request(req, "malformed JSON");
    auto parsed = parse_command(*body);
    if (auto* bad = std::get_if<invalid_command>(&parsed)) co_return bad_request(req, bad->message);
    auto r = co_await ctx_.commits.async_submit(std::move(std::get<command>(parsed)));
    if (r.status == submit_status::unavailable) co_return unavailable(req);
    if (r.status == submit_status::outcome_unknown) co_return unavailable(req, "outcome_unknown");
    co_return http::make_json_response(req, 200, reply_json(r.decision));
  }

  asio::awaitable<response> batch(const request& req) {
    auto body = parse_body(req);
    if (!body) co_return bad_request(req, "malformed JSON");
    if (!body->is_object() || body->size() != 1 || !body->contains("commands") || !(*body)["commands"].is_array())
      co_return bad_request(req, "body must be {\"commands\": [...]}");
    const auto& items = (*body)["commands"];
    if (items.empty() || items.size() > max_batch_commands)
      co_return bad_request(req, "a batch holds 1 to 1000 commands");
    std::vector<command> commands;
    commands.reserve(items.size());
    // All or nothing at validation: one bad command refuses the whole batch.
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto parsed = parse_command(items[i]);
      if (auto* bad = std::get_if<invalid_command>(&parsed))
        co_return bad_request(req, "commands[" + std::to_string(i) + "]: " + bad->message);
      commands.push_back(std::move(std::get<command>(parsed)));
    }
    auto results = co_await ctx_.commits.async_submit_many(std::move(commands));
    std::string out = R"({"results":[)";
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (i) out += ',';
      out += result_json(results[i]);
    }
    out += "]}";
    co_return http::make_json_response(req, 200, std::move(out));
  }

  route_context& ctx_;
};

}  // namespace

http::handler make_handler(route_context& ctx) {
  return [r = std::make_shared<router>(ctx)](request req) -> asio::awaitable<response> {
    co_return co_await (*r)(std::move(req));
  };
}

}  // namespace tally::shard
