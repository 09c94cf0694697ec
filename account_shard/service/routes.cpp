#include "account_shard/service/routes.hpp"

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"
#include "common/http/routing.hpp"
#include "common/log/log.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::request;
using http::response;

namespace {

constexpr std::size_t max_batch_commands = 1000;

using http::query_param;
using http::split_target;
using http::to_int;

response json(const request& req, unsigned status, const nlohmann::json& body) {
  return http::json_response(req, status, body);
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

class router {
 public:
  explicit router(route_context& ctx)
      : ctx_(ctx), probes_{ctx.ready, [&m = ctx.metrics] { return m.render(); }} {}

  asio::awaitable<response> operator()(request req) {
    auto t = split_target(std::string_view(req.target().data(), req.target().size()));
    const auto& p = t.path;
    auto method = req.method();
    if (auto probe = http::probe_response(req, t, probes_)) co_return std::move(*probe);
    if (p.empty() || p[0] != "v1") co_return http::make_error_response(req, 404, "not_found", "no such route");
    if (!http::bearer_token_ok(req, ctx_.internal_token))
      co_return http::make_error_response(req, 401, "unauthorized", "missing or wrong internal token");

    if (method == bhttp::verb::post && p.size() == 2 && p[1] == "commands") co_return co_await single(req);
    if (method == bhttp::verb::post && p.size() == 2 && p[1] == "batch") co_return co_await batch(req);
    if (p.size() == 3 && p[1] == "accounts" && method == bhttp::verb::get) {
      const std::string tenant(p[2]);
      const auto status = query_param(t.query, "status").value_or("");
      auto limit = to_int(query_param(t.query, "limit").value_or("100"));
      if (!is_valid_id(tenant)) co_return bad_request(req, "bad tenant id");
      if (status != "active" && status != "frozen" && status != "closed")
        co_return bad_request(req, "status must be active, frozen or closed");
      if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
      co_return from_query(req, co_await ctx_.reads.async_accounts_by_status(tenant, std::string(status),
                                                                             static_cast<int>(*limit)));
    }
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
      if (p.size() == 5 && method == bhttp::verb::get && p[4] == "lots") {
        lot_page page;
        auto state = query_param(t.query, "state").value_or("open");
        auto limit = to_int(query_param(t.query, "limit").value_or("100"));
        auto after = to_int(query_param(t.query, "after").value_or("0"));
        if (state != "open" && state != "all") co_return bad_request(req, "state must be open or all");
        if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
        if (!after || *after < 0) co_return bad_request(req, "after must be a cursor from an earlier page's next");
        page.after = *after;
        page.all = state == "all";
        page.limit = static_cast<int>(*limit);
        co_return from_query(req, co_await ctx_.reads.async_lots(tenant, account, page));
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
      std::optional<std::string> tenant;
      if (auto given = query_param(t.query, "tenant")) {
        if (!is_valid_id(*given)) co_return bad_request(req, "bad tenant id");
        tenant = std::string(*given);
      }
      co_return from_query(req, co_await ctx_.reads.async_reconcile(watermark, freeze == "true", ctx_.writer_epoch(),
                                                                    std::move(tenant)));
    }
    if (p.size() == 3 && p[1] == "reconciliation" && p[2] == "runs" && method == bhttp::verb::get) {
      auto limit = to_int(query_param(t.query, "limit").value_or("10"));
      if (!limit || *limit < 1 || *limit > 100) co_return bad_request(req, "limit must be between 1 and 100");
      std::optional<std::string> tenant;
      if (auto given = query_param(t.query, "tenant")) {
        if (!is_valid_id(*given)) co_return bad_request(req, "bad tenant id");
        tenant = std::string(*given);
      }
      co_return from_query(req, co_await ctx_.reads.async_reconciliation_runs(std::move(tenant), static_cast<int>(*limit)));
    }
    if (p.size() == 2 && p[1] == "status" && method == bhttp::verb::get) co_return co_await status(req);
    if (p.size() == 3 && p[1] == "admin" && p[2] == "failpoints") co_return http::failpoints_response(req);
    if (p.size() == 3 && p[1] == "admin" && p[2] == "clock" && ctx_.clock_control) co_return clock(req);
    co_return http::make_error_response(req, 404, "not_found", "no such route");
  }

 private:
  asio::awaitable<response> single(const request& req) {
    auto body = http::parse_json_body(req);
    if (!body) co_return bad_request(req, "malformed JSON");
    auto parsed = parse_command(*body);
    if (auto* bad = std::get_if<invalid_command>(&parsed)) co_return bad_request(req, bad->message);
    auto r = co_await ctx_.commits.async_submit(std::move(std::get<command>(parsed)));
    if (r.status == submit_status::unavailable) co_return unavailable(req);
    if (r.status == submit_status::outcome_unknown) co_return unavailable(req, "outcome_unknown");
    co_return http::make_json_response(req, 200, reply_json(r.decision));
  }

  // For operators: whether this instance writes, its commit figures, and
  // how far the relay is behind this shard's outbox.
  asio::awaitable<response> status(const request& req) {
    nlohmann::json body{{"leader", ctx_.ready()}, {"epoch", ctx_.writer_epoch()}, {"commits", ctx_.commits.stats()}};
    auto backlog = co_await ctx_.reads.async_outbox_backlog();
    body["outbox"] = backlog.error ? nlohmann::json(nullptr) : backlog.body;
    co_return json(req, 200, body);
  }

  asio::awaitable<response> batch(const request& req) {
    auto body = http::parse_json_body(req);
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

  // Tests move the clock that decides expiries (testing.clock_control).
  response clock(const request& req) {
    if (req.method() == bhttp::verb::post) {
      auto body = http::parse_json_body(req);
      std::int64_t offset = 0;
      std::string unknown;
      if (!body || !body->is_object() || !validate::only_fields(*body, {"offset_ms"}, unknown) ||
          !validate::field_reader{*body, {}}.integer("offset_ms", offset, -(1LL << 50), 1LL << 50))
        return bad_request(req, "body must be {\"offset_ms\": integer}");
      ctx_.clock.set_offset_ms(offset);
      log::warn("shard clock moved", {{"offset_ms", offset}});
    }
    return json(req, 200, {{"offset_ms", ctx_.clock.offset_ms()}, {"now_ms", ctx_.clock.now_ms()}});
  }

  route_context& ctx_;
  http::service_probes probes_;
};

}  // namespace

http::handler make_handler(route_context& ctx) {
  return http::shared_handler(std::make_shared<router>(ctx));
}

}  // namespace tally::shard
