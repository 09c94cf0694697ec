// The router's calls to its upstreams (router.hpp): their targets, the
// shard of an account, rate limits, forwarding a request with the internal
// token, and reading a document.
#include "common/contract/errors.hpp"
#include "common/log/log.hpp"
#include "gateway/service/hot_accounts.hpp"
#include "gateway/service/router.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

std::string tenant_path(const principal& who, const std::vector<std::string>& p, std::size_t from) {
  std::string out = "/v1/tenants/" + who.tenant;
  for (auto i = from; i < p.size(); ++i) out.append(1, '/').append(http::encoded_segment(p[i]));
  return out;
}

std::string wait_query(const read_params& params) {
  return params.wait_ms ? "wait_ms=" + std::to_string(*params.wait_ms) : "";
}

http::client_pool& router::shard_of(const principal& who, const std::string& account_id) {
  return *ctx_.shards[ctx_.routes.shard_of(who.tenant, account_id)];
}

asio::awaitable<std::optional<response>> router::limit_key(const request& req, const principal& who) {
  std::vector<std::string> no_accounts;  // named: GCC 12 mishandles braced temporaries in co_await operands
  co_return co_await limit(req, who, std::move(no_accounts));
}

asio::awaitable<std::optional<response>> router::limit(const request& req, const principal& who,
                                                       std::vector<std::string> accounts) {
  auto a = co_await ctx_.limiter.async_admit(who, accounts);
  if (a.allowed) co_return std::nullopt;
  auto res = http::make_error_response(req, contract::error_code::rate_limited,
                                       a.scope == "account" ? "too many requests for this account; retry later"
                                                            : "too many requests for this API key; retry later");
  res.set(bhttp::field::retry_after, std::to_string(a.retry_after_s));
  co_return res;
}

namespace {

// A shard refused a write because its account's queue was past its safe
// wait (nothing changed): 429 account_busy, Retry-After `seconds`.
response account_busy(const request& req, std::int64_t seconds) {
  auto res = http::make_error_response(
      req, contract::error_code::account_busy,
      "the account has more writes queued than its shard starts within its safe wait; nothing changed, retry "
      "after Retry-After (with the same biz_id for a write)");
  res.set(bhttp::field::retry_after, std::to_string(seconds));
  return res;
}

}  // namespace

// Sends the request on with the internal token; passes the answer back
// (status, body, Idempotent-Replayed), or 503 when nobody answered; a
// shard's account_busy becomes 429 with Retry-After.
template <class Upstream>
asio::awaitable<response> router::forward(const request& req, Upstream& to, std::string_view who_name, std::string path,
                                          std::string query, const read_params& params) {
  std::string target = std::move(path);
  if (!query.empty()) target.append(1, '?').append(query);
  request out(req.method(), target, 11);
  out.set(bhttp::field::authorization, "Bearer " + ctx_.upstream_token);
  out.set(bhttp::field::content_type, "application/json");
  out.set(request_id_header, req[request_id_header]);
  out.body() = req.body();
  const auto timeout = ctx_.upstream_timeout + std::chrono::milliseconds(params.wait_ms.value_or(0));
  auto r = co_await to.async_request(std::move(out), timeout);
  if (r.error) {
    upstream_failures_.inc();
    log::warn("upstream did not answer",
              {{"upstream", who_name}, {"error", r.error.message()}, {"request_id", req[request_id_header]}});
    co_return http::make_error_response(
        req, contract::error_code::unavailable,
        std::string(who_name) + " is unavailable; retry (with the same biz_id for a write)");
  }
  const auto status = r.message.result_int();
  if (status == 401 || status == 403) {  // our token, not the caller's: a configuration fault
    upstream_failures_.inc();
    log::error("upstream refused the internal token", {{"upstream", who_name}});
    co_return http::make_error_response(
        req, contract::error_code::unavailable,
        std::string(who_name) + " is unavailable; retry (with the same biz_id for a write)");
  }
  const auto upstream_after = r.message.find(bhttp::field::retry_after);
  const std::string_view after_text =
      upstream_after == r.message.end() ? std::string_view() : std::string_view(upstream_after->value());
  if (auto busy = account_busy_retry_after(status, r.message.body(), after_text)) co_return account_busy(req, *busy);
  auto res = http::make_json_response(req, status, std::move(r.message.body()));
  if (auto replayed = r.message.find("Idempotent-Replayed"); replayed != r.message.end())
    res.set("Idempotent-Replayed", replayed->value());
  co_return res;
}
template asio::awaitable<response> router::forward(const request&, http::client_pool&, std::string_view, std::string,
                                                   std::string, const read_params&);
template asio::awaitable<response> router::forward(const request&, http::failover_pool&, std::string_view, std::string,
                                                   std::string, const read_params&);

asio::awaitable<response> router::to_orchestrator(const request& req, std::string path, std::string_view query,
                                                  const read_params& params) {
  co_return co_await forward(req, ctx_.orchestrator, "the orchestrator", std::move(path), std::string(query), params);
}

template <class Upstream>
asio::awaitable<std::optional<std::string>> router::fetch(Upstream& to, std::string target, bool with_token) {
  request get(bhttp::verb::get, target, 11);
  if (with_token) get.set(bhttp::field::authorization, "Bearer " + ctx_.upstream_token);
  auto r = co_await to.async_request(std::move(get), ctx_.upstream_timeout);
  if (r.error || r.message.result_int() != 200) co_return std::nullopt;
  co_return std::move(r.message.body());
}
template asio::awaitable<std::optional<std::string>> router::fetch(http::client_pool&, std::string, bool);
template asio::awaitable<std::optional<std::string>> router::fetch(http::failover_pool&, std::string, bool);

}  // namespace tally::gateway
