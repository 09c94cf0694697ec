// The operators' routes (/v1/admin/): sagas, accounts, reconciliation,
// shards and health, for the caller's tenant only.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/contract/saga_id.hpp"
#include "common/contract/saga_request.hpp"
#include "common/metrics/scrape.hpp"
#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"
#include "gateway/service/hot_accounts.hpp"
#include "gateway/service/router.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using nlohmann::json;

namespace {

// ?shard=N: a shard's position in the routing, else the refusal's message.
std::variant<std::size_t, std::string> shard_number(std::string_view query, std::size_t shards) {
  auto n = http::to_int(http::query_param(query, "shard").value_or(""));
  if (!n || *n < 0 || static_cast<std::size_t>(*n) >= shards)
    return "shard must be a shard number from 0 to " + std::to_string(shards - 1);
  return static_cast<std::size_t>(*n);
}

std::string shard_name(std::size_t i) { return "shard " + std::to_string(i); }

}  // namespace

asio::awaitable<response> router::workflows(request& req, const call&) {
  const read_params none;
  co_return co_await forward(req, ctx_.orchestrator, "the orchestrator", "/v1/workflows", "", none);
}

// GET /v1/admin/sagas and /v1/admin/sagas/counts: the orchestrator's, with
// the caller's filters and no wait.
asio::awaitable<response> router::admin_sagas(request& req, const call& c) {
  const read_params none;
  co_return co_await to_orchestrator(req, tenant_path(*c.who, c.target.path, 1), c.target.query, none);
}

// GET /v1/admin/sagas/{id}, POST …/retry and …/abort.
asio::awaitable<response> router::admin_saga(request& req, const call& c) {
  if (req.method() == bhttp::verb::post) {
    if (auto bad = contract::check_action_body(req.body())) co_return bad_request(req, bad->message);
  }
  if (!contract::is_saga_id(c.args[0])) co_return no_such_saga(req);
  // The operator endpoints promise no wait: a longer one is cut to the
  // upstream time-out, so the orchestrator answers (202 while the saga
  // runs) before the gateway would give up on it.
  read_params capped;
  if (c.params.wait_ms) capped.wait_ms = std::min<std::int64_t>(*c.params.wait_ms, ctx_.upstream_timeout.count());
  co_return co_await to_orchestrator(req, tenant_path(*c.who, c.target.path, 1), wait_query(capped), capped);
}

// POST /v1/admin/accounts/{id}/freeze | unfreeze, on the account's shard.
asio::awaitable<response> router::freeze(request& req, const call& c) {
  const auto& id = c.args[0];
  if (!validate::is_valid_id(id)) co_return bad_request(req, "bad account id");
  const read_params none;
  auto r = co_await forward(req, shard_of(*c.who, id), "the account's shard",
                            "/v1/accounts/" + c.who->tenant + "/" + id + "/" + c.target.path.back(), "", none);
  if (r.result_int() == 200) r.body() = without_tenant(r.body());
  co_return r;
}

// GET /v1/admin/accounts?status=: every shard's accounts in that status.
asio::awaitable<response> router::accounts_in_status(request& req, const call& c) {
  const auto status = http::query_param(c.target.query, "status").value_or("");
  if (status != "active" && status != "frozen" && status != "closed")
    co_return bad_request(req, "status must be active, frozen or closed");
  const auto query = "status=" + status + "&limit=" + std::to_string(c.params.limit.value_or(100));
  auto all = json::array();
  for (std::size_t i = 0; i < ctx_.shards.size(); ++i) {
    auto body = co_await fetch(*ctx_.shards[i], "/v1/accounts/" + c.who->tenant + "?" + query, true);
    auto page = body ? json::parse(*body, nullptr, false) : json();
    if (!page.is_object() || !page["accounts"].is_array())
      co_return http::make_error_response(req, contract::error_code::unavailable,
                                          shard_name(i) + " is unavailable; retry");
    for (auto& a : page["accounts"]) {
      a = without_tenant(std::move(a));
      a["shard"] = i;
      all.push_back(std::move(a));
    }
  }
  co_return http::json_response(req, 200, {{"accounts", std::move(all)}});
}

// GET /v1/admin/reconciliation?shard=N&mode=: runs the shard's
// reconciliation for the caller's tenant now (the shard records it),
// incremental unless mode=full.
asio::awaitable<response> router::reconciliation(request& req, const call& c) {
  auto n = shard_number(c.target.query, ctx_.shards.size());
  if (auto* bad = std::get_if<std::string>(&n)) co_return bad_request(req, *bad);
  const auto mode = http::query_param(c.target.query, "mode").value_or("incremental");
  if (mode != "incremental" && mode != "full") co_return bad_request(req, "mode must be incremental or full");
  const read_params none;
  co_return co_await forward(req, *ctx_.shards[std::get<std::size_t>(n)], "the shard", "/v1/reconciliation",
                             "tenant=" + c.who->tenant + "&mode=" + mode, none);
}

// The full audits of the shard ?shard=N for the caller's tenant: POST
// /v1/admin/audits?freeze= starts one (202), GET lists them (?limit=),
// GET …/{id} reads one, POST …/{id}/cancel cancels it. The shard checks the
// query and the id; an audit of another tenant is not found.
asio::awaitable<response> router::audits(request& req, const call& c) {
  auto n = shard_number(c.target.query, ctx_.shards.size());
  if (auto* bad = std::get_if<std::string>(&n)) co_return bad_request(req, *bad);
  std::string path = "/v1/audits";
  for (std::size_t i = 3; i < c.target.path.size(); ++i) path += "/" + http::encoded_segment(c.target.path[i]);
  std::string query = "tenant=" + c.who->tenant;
  if (auto freeze = http::query_param(c.target.query, "freeze")) {
    if (*freeze != "true" && *freeze != "false") co_return bad_request(req, "freeze must be true or false");
    query += "&freeze=" + *freeze;
  }
  if (c.params.limit) query += "&limit=" + std::to_string(*c.params.limit);
  const read_params none;
  co_return co_await forward(req, *ctx_.shards[std::get<std::size_t>(n)], "the shard", std::move(path),
                             std::move(query), none);
}

// GET /v1/admin/reconciliation/reports?shard=N&limit=: its last runs.
asio::awaitable<response> router::reconciliation_reports(request& req, const call& c) {
  auto n = shard_number(c.target.query, ctx_.shards.size());
  if (auto* bad = std::get_if<std::string>(&n)) co_return bad_request(req, *bad);
  const auto limit = c.params.limit.value_or(10);
  if (limit > 100) co_return bad_request(req, "limit must be between 1 and 100");
  const auto shard = std::get<std::size_t>(n);
  auto body = co_await fetch(
      *ctx_.shards[shard], "/v1/reconciliation/runs?tenant=" + c.who->tenant + "&limit=" + std::to_string(limit), true);
  auto page = body ? json::parse(*body, nullptr, false) : json();
  if (!page.is_object() || !page["reports"].is_array())
    co_return http::make_error_response(req, contract::error_code::unavailable,
                                        shard_name(shard) + " is unavailable; retry");
  for (auto& r : page["reports"]) r["shard"] = shard;
  co_return http::json_response(req, 200, page);
}

asio::awaitable<response> router::shards(request& req, const call& c) {
  auto all = json::array();
  for (std::size_t i = 0; i < ctx_.shards.size(); ++i) {
    json entry{{"shard", i}, {"name", ctx_.routes.shards()[i].name}, {"buckets", ctx_.routes.buckets_of(i)}};
    auto body = co_await fetch(*ctx_.shards[i], "/v1/status", true);
    entry["health"] = body ? "ok" : "unreachable";
    if (body) {
      auto status = json::parse(*body, nullptr, false);
      if (status.is_object()) {
        keep_own_hot_accounts(status, c.who->tenant);
        entry.update(status);
      }
    }
    all.push_back(std::move(entry));
  }
  co_return http::json_response(req, 200, {{"shards", std::move(all)}});
}

// GET /v1/admin/clusters: the replicated clusters as their monitor last
// showed them (docs/ha.md); {"configured": false} on single servers.
asio::awaitable<response> router::clusters(request& req, const call&) {
  if (!ctx_.clusters) co_return http::json_response(req, 200, {{"configured", false}, {"formations", json::array()}});
  co_return http::json_response(req, 200, ctx_.clusters->view());
}

// GET /v1/admin/health: each service's readiness, and the figures an
// operator watches (totals since each process started).
asio::awaitable<response> router::health(request& req, const call&) {
  auto services = json::array({{{"name", "gateway"}, {"ready", ctx_.ready()}}});
  auto ready = [&](std::string name, bool is_ready) {
    services.push_back({{"name", std::move(name)}, {"ready", is_ready}});
  };
  ready("orchestrator", (co_await fetch(ctx_.orchestrator, "/readyz", false)).has_value());
  const auto orchestrator = co_await fetch(ctx_.orchestrator, "/metrics", false);
  for (std::size_t i = 0; i < ctx_.shards.size(); ++i)
    ready(shard_name(i), (co_await fetch(*ctx_.shards[i], "/readyz", false)).has_value());
  std::optional<std::string> relay;
  if (ctx_.relay) {
    ready("relay", (co_await fetch(*ctx_.relay, "/readyz", false)).has_value());
    relay = co_await fetch(*ctx_.relay, "/metrics", false);
  }
  const auto own = ctx_.metrics.render();
  json figures = json::object();
  // Counters are whole numbers; the relay's lag is in seconds.
  auto figure = [&](const char* key, std::optional<double> v) {
    if (v) figures[key] = static_cast<std::int64_t>(*v);
  };
  if (orchestrator) {
    figure("sagas_started", metrics::sample_sum(*orchestrator, "tally_orch_sagas_started_total"));
    figure("sagas_finished", metrics::sample_sum(*orchestrator, "tally_orch_sagas_finished_total"));
  }
  figure("upstream_failures", metrics::sample_sum(own, "tally_gateway_upstream_failures_total"));
  figure("rate_limited", metrics::sample_sum(own, "tally_gateway_rate_limited_total"));
  if (auto lag = relay ? metrics::sample_max(*relay, "tally_relay_lag_seconds") : std::nullopt)
    figures["relay_lag_seconds"] = *lag;
  const auto now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  co_return http::json_response(
      req, 200,
      {{"at", time::rfc3339_ms(now.count())}, {"services", std::move(services)}, {"metrics", std::move(figures)}});
}

}  // namespace tally::gateway
