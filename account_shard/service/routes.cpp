#include "account_shard/service/routes.hpp"

#include <charconv>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"
#include "common/contract/errors.hpp"
#include "common/http/route_table.hpp"
#include "common/http/routing.hpp"
#include "common/log/log.hpp"
#include "common/retry/backoff.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::request;
using http::response;

namespace {

constexpr std::size_t max_batch_commands = 1000;
constexpr std::size_t hottest_accounts = 5;  // listed by GET /v1/status

using http::query_param;
using http::split_target;
using http::to_int;

response json(const request& req, unsigned status, const nlohmann::json& body) {
  return http::json_response(req, status, body);
}

using http::bad_request;

response unavailable(const request& req, std::string_view code = "unavailable") {
  return http::make_error_response(req, 503, code, "the shard cannot decide now; resend the same key");
}

response from_query(const request& req, const query_result& r) {
  if (r.error) {
    log::warn("query failed", {{"error", r.error.message}});
    return unavailable(req);
  }
  if (!r.found) return http::not_found(req, "no such object");
  return json(req, 200, r.body);
}

// Refused by hot-account admission: nothing was decided or written.
response account_busy(const request& req, std::chrono::milliseconds retry_after) {
  auto res = http::make_error_response(
      req, contract::error_code::account_busy,
      "the account has more commands queued than it can start within the shard's maximum wait; resend the same "
      "key after " +
          std::to_string(retry_after.count()) + " ms");
  res.set(bhttp::field::retry_after, std::to_string(retry::retry_after_seconds(retry_after.count())));
  return res;
}

std::string result_json(const submit_result& r) {
  using contract::shard_code;
  switch (r.status) {
    case submit_status::decided: return contract::to_json_text(r.decision);
    case submit_status::unavailable:
      return contract::to_json_text(contract::unavailable_reply(shard_code::unavailable));
    case submit_status::outcome_unknown:
      return contract::to_json_text(contract::unavailable_reply(shard_code::outcome_unknown));
    case submit_status::account_busy:
      return contract::to_json_text(contract::unavailable_reply(shard_code::account_busy, r.retry_after.count()));
  }
  return "{}";
}

class router : public http::internal_router<router, route_context> {
 public:
  using internal_router::internal_router;

  // Under /v1/ everything needs the internal token. Bodies: a GET reads
  // none, freeze and unfreeze `{}` or nothing, the rest up to the server's
  // listen.body_limit (a batch of 1000 commands is about 150 KB).
  static std::span<const route> table() {
    using v = bhttp::verb;
    static const route routes[] = {
        {v::post, "/v1/commands", &router::single},
        {v::post, "/v1/batch", &router::batch},
        {v::get, "/v1/accounts/{tenant}", &router::accounts_in_status},
        {v::get, "/v1/accounts/{tenant}/{account_id}", &router::account},
        {v::get, "/v1/accounts/{tenant}/{account_id}/entries", &router::entries},
        {v::get, "/v1/accounts/{tenant}/{account_id}/lots", &router::lots},
        {v::get, "/v1/accounts/{tenant}/{account_id}/holds", &router::holds},
        {v::post, "/v1/accounts/{tenant}/{account_id}/freeze", &router::set_status, http::action_body_limit},
        {v::post, "/v1/accounts/{tenant}/{account_id}/unfreeze", &router::set_status, http::action_body_limit},
        {v::get, "/v1/operations/{tenant}/{account_id}/{biz_type}/{biz_id}", &router::operation},
        {v::get, "/v1/holds/old", &router::old_holds},
        {v::get, "/v1/reconciliation", &router::reconcile},
        {v::get, "/v1/reconciliation/runs", &router::reconciliation_runs},
        {v::post, "/v1/audits", &router::start_audit, http::action_body_limit},
        {v::get, "/v1/audits", &router::audits},
        {v::get, "/v1/audits/{audit_id}", &router::audit},
        {v::post, "/v1/audits/{audit_id}/cancel", &router::cancel_audit, http::action_body_limit},
        {v::get, "/v1/status", &router::status},
        {v::get, "/v1/admin/clock", &router::clock},
        {v::post, "/v1/admin/clock", &router::clock},
    };
    return routes;
  }

 private:
  // ---- accounts ----
  // {tenant}/{account_id}, both ids; else the refusal.
  static std::optional<response> bad_ids(const request& req, const http::route_call& c) {
    for (const auto& id : c.args)
      if (!is_valid_id(id)) return bad_request(req, "bad tenant or account id");
    return std::nullopt;
  }

  asio::awaitable<response> accounts_in_status(const request& req, const http::route_call& c) {
    const auto& tenant = c.args[0];
    const auto status = query_param(c.target.query, "status").value_or("");
    auto limit = to_int(query_param(c.target.query, "limit").value_or("100"));
    if (!is_valid_id(tenant)) co_return bad_request(req, "bad tenant id");
    if (status != "active" && status != "frozen" && status != "closed")
      co_return bad_request(req, "status must be active, frozen or closed");
    if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
    co_return from_query(
        req, co_await ctx_.reads.async_accounts_by_status(tenant, std::string(status), static_cast<int>(*limit)));
  }

  asio::awaitable<response> account(const request& req, const http::route_call& c) {
    if (auto bad = bad_ids(req, c)) co_return std::move(*bad);
    co_return from_query(req, co_await ctx_.reads.async_account(c.args[0], c.args[1]));
  }

  asio::awaitable<response> entries(const request& req, const http::route_call& c) {
    if (auto bad = bad_ids(req, c)) co_return std::move(*bad);
    auto after = to_int(query_param(c.target.query, "after").value_or("0"));
    auto limit = to_int(query_param(c.target.query, "limit").value_or("100"));
    if (!after || *after < 0) co_return bad_request(req, "after must be a ledger sequence number");
    if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
    co_return from_query(req,
                         co_await ctx_.reads.async_entries(c.args[0], c.args[1], *after, static_cast<int>(*limit)));
  }

  asio::awaitable<response> lots(const request& req, const http::route_call& c) {
    if (auto bad = bad_ids(req, c)) co_return std::move(*bad);
    lot_page page;
    auto state = query_param(c.target.query, "state").value_or("open");
    auto limit = to_int(query_param(c.target.query, "limit").value_or("100"));
    auto after = to_int(query_param(c.target.query, "after").value_or("0"));
    if (state != "open" && state != "all") co_return bad_request(req, "state must be open or all");
    if (!limit || *limit < 1 || *limit > 500) co_return bad_request(req, "limit must be between 1 and 500");
    if (!after || *after < 0) co_return bad_request(req, "after must be a cursor from an earlier page's next");
    page.after = *after;
    page.all = state == "all";
    page.limit = static_cast<int>(*limit);
    co_return from_query(req, co_await ctx_.reads.async_lots(c.args[0], c.args[1], page));
  }

  asio::awaitable<response> holds(const request& req, const http::route_call& c) {
    if (auto bad = bad_ids(req, c)) co_return std::move(*bad);
    co_return from_query(req, co_await ctx_.reads.async_holds(c.args[0], c.args[1]));
  }

  asio::awaitable<response> set_status(const request& req, const http::route_call& c) {
    if (auto bad = bad_ids(req, c)) co_return std::move(*bad);
    std::string status = c.target.path.back() == "freeze" ? "frozen" : "active";
    auto r = co_await ctx_.reads.async_set_status(c.args[0], c.args[1], status, ctx_.writer_epoch());
    if (r.found && !r.error)
      log::warn("account status set by operator", {{"account_id", c.args[1]}, {"status", status}});
    co_return from_query(req, r);
  }

  asio::awaitable<response> operation(const request& req, const http::route_call& c) {
    for (const auto& id : c.args)
      if (!is_valid_id(id)) co_return bad_request(req, "bad id in path");
    co_return from_query(req, co_await ctx_.reads.async_operation(c.args[0], c.args[1], c.args[2], c.args[3]));
  }

  asio::awaitable<response> old_holds(const request& req, const http::route_call& c) {
    auto older = to_int(query_param(c.target.query, "older_than_ms").value_or("60000"));
    auto limit = to_int(query_param(c.target.query, "limit").value_or("100"));
    if (!older || *older < 0) co_return bad_request(req, "older_than_ms must be a non-negative integer");
    if (!limit || *limit < 1 || *limit > 1000) co_return bad_request(req, "limit must be between 1 and 1000");
    co_return from_query(req, co_await ctx_.reads.async_old_holds(*older, static_cast<int>(*limit)));
  }

  // ---- reconciliation ----
  // ?tenant=, when given: the tenant, or the refusal.
  static std::variant<std::optional<std::string>, response> tenant_of(const request& req, const http::route_call& c) {
    auto given = query_param(c.target.query, "tenant");
    if (!given) return std::optional<std::string>();
    if (!is_valid_id(*given)) return bad_request(req, "bad tenant id");
    return std::optional<std::string>(std::move(*given));
  }

  asio::awaitable<response> reconcile(const request& req, const http::route_call& c) {
    std::optional<std::int64_t> watermark;
    if (auto w = query_param(c.target.query, "watermark")) {
      watermark = to_int(*w);
      if (!watermark || *watermark < 0) co_return bad_request(req, "watermark must be a ledger sequence number");
    }
    auto freeze = query_param(c.target.query, "freeze").value_or("true");
    if (freeze != "true" && freeze != "false") co_return bad_request(req, "freeze must be true or false");
    auto mode = reconcile_mode_from(query_param(c.target.query, "mode").value_or("incremental"));
    if (!mode) co_return bad_request(req, "mode must be incremental or full");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    reconcile_request run{*mode, watermark, freeze == "true", std::get<std::optional<std::string>>(tenant)};
    auto r = co_await ctx_.reads.async_reconcile(std::move(run), ctx_.writer_epoch());
    if (!r.refusal.empty()) co_return bad_request(req, r.refusal);
    co_return from_query(req, r);
  }

  asio::awaitable<response> reconciliation_runs(const request& req, const http::route_call& c) {
    auto limit = to_int(query_param(c.target.query, "limit").value_or("10"));
    if (!limit || *limit < 1 || *limit > 100) co_return bad_request(req, "limit must be between 1 and 100");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    co_return from_query(req, co_await ctx_.reads.async_reconciliation_runs(
                                  std::get<std::optional<std::string>>(tenant), static_cast<int>(*limit)));
  }

  // ---- full audits ----
  // POST /v1/audits?tenant=&freeze=: 202 with the audit, which the audit
  // job pages in the background.
  asio::awaitable<response> start_audit(const request& req, const http::route_call& c) {
    auto freeze = query_param(c.target.query, "freeze").value_or("true");
    if (freeze != "true" && freeze != "false") co_return bad_request(req, "freeze must be true or false");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    auto r = co_await ctx_.reads.async_audit_start(std::get<std::optional<std::string>>(tenant), freeze == "true",
                                                   ctx_.writer_epoch());
    if (r.error) co_return from_query(req, r);
    ctx_.audit_started();
    co_return json(req, 202, r.body);
  }

  asio::awaitable<response> audits(const request& req, const http::route_call& c) {
    auto limit = to_int(query_param(c.target.query, "limit").value_or("10"));
    if (!limit || *limit < 1 || *limit > 100) co_return bad_request(req, "limit must be between 1 and 100");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    co_return from_query(
        req, co_await ctx_.reads.async_audits(std::get<std::optional<std::string>>(tenant), static_cast<int>(*limit)));
  }

  // GET /v1/audits/{id}?tenant= and POST …/cancel: not found unless the
  // audit is the tenant's (when given).
  asio::awaitable<response> audit(const request& req, const http::route_call& c) {
    auto id = to_int(c.args[0]);
    if (!id || *id < 1) co_return http::not_found(req, "no such audit");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    co_return from_query(req, co_await ctx_.reads.async_audit(*id, std::get<std::optional<std::string>>(tenant)));
  }

  asio::awaitable<response> cancel_audit(const request& req, const http::route_call& c) {
    auto id = to_int(c.args[0]);
    if (!id || *id < 1) co_return http::not_found(req, "no such audit");
    auto tenant = tenant_of(req, c);
    if (auto* bad = std::get_if<response>(&tenant)) co_return std::move(*bad);
    co_return from_query(req, co_await ctx_.reads.async_audit_cancel(*id, std::get<std::optional<std::string>>(tenant),
                                                                     ctx_.writer_epoch()));
  }

  // ---- commands ----
  asio::awaitable<response> single(const request& req, const http::route_call&) {
    auto body = http::parse_json_body(req);
    if (!body) co_return bad_request(req, "malformed JSON");
    auto parsed = parse_command(*body);
    if (auto* bad = std::get_if<invalid_command>(&parsed)) co_return bad_request(req, bad->message);
    auto r = co_await ctx_.commits.async_submit(std::move(std::get<command>(parsed)));
    if (r.status == submit_status::unavailable) co_return unavailable(req);
    if (r.status == submit_status::outcome_unknown)
      co_return unavailable(req, contract::to_string(contract::shard_code::outcome_unknown));
    if (r.status == submit_status::account_busy) co_return account_busy(req, r.retry_after);
    co_return http::make_json_response(req, 200, contract::to_json_text(r.decision));
  }

  // For operators: whether this instance writes, its commit figures, and
  // how far the relay is behind this shard's outbox.
  asio::awaitable<response> status(const request& req, const http::route_call&) {
    nlohmann::json body{{"leader", ctx_.probes.ready()},
                        {"epoch", ctx_.writer_epoch()},
                        {"commits", ctx_.commits.stats()},
                        {"admission", ctx_.commits.admission_stats(hottest_accounts)}};
    auto backlog = co_await ctx_.reads.async_outbox_backlog();
    body["outbox"] = backlog.error ? nlohmann::json(nullptr) : backlog.body;
    co_return json(req, 200, body);
  }

  asio::awaitable<response> batch(const request& req, const http::route_call&) {
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

  // Tests move the clock that decides expiries (testing.clock_control; else 404).
  asio::awaitable<response> clock(const request& req, const http::route_call&) {
    if (!ctx_.clock_control) co_return http::not_found(req);
    co_return move_clock(req);
  }

  response move_clock(const request& req) {
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
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::internal_handler(std::make_shared<router>(ctx), ctx); }
http::body_limit_rule body_limits() { return http::internal_body_limits(router::table()); }

}  // namespace tally::shard
