#include "gateway/service/routes.hpp"

#include <algorithm>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/http/routing.hpp"
#include "common/log/log.hpp"
#include "common/projection/keys.hpp"
#include "common/validate/fields.hpp"
#include "gateway/api/requests.hpp"
#include "gateway/stream/messages.hpp"
#include "orchestrator/saga/ids.hpp"
#include "orchestrator/saga/request.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using http::request;
using http::response;
using nlohmann::json;

namespace {

constexpr std::string_view request_id_header = "X-Request-Id";
constexpr std::string_view read_header = "X-Tally-Read";

response error(const request& req, unsigned status, std::string_view code, std::string_view message) {
  return http::make_error_response(req, status, code, message);
}
response bad_request(const request& req, std::string_view message) { return error(req, 400, "invalid_request", message); }
response not_found(const request& req, std::string_view what = "no such route") { return error(req, 404, "not_found", what); }
// Whatever its format: what is no saga id names no saga.
response no_such_saga(const request& req) { return not_found(req, "no such saga"); }
response unavailable(const request& req, std::string_view who) {
  return error(req, 503, "unavailable", std::string(who) + " is unavailable; retry (with the same biz_id for a write)");
}

// A document from a projection or a shard, as the API shows it.
response document(const request& req, unsigned status, std::string body, std::string_view source) {
  auto res = http::make_json_response(req, status, std::move(body));
  res.set(read_header, source);
  return res;
}

// A completed deduction, transfer or batch deduction: what its refunds gave
// back changes after it finished, and only the orchestrator adds it up.
bool refundable(const std::string& doc) {
  auto j = json::parse(doc, nullptr, false);
  if (!j.is_object() || j.value("state", "") != "completed") return false;
  const auto type = j.value("type", "");
  return type == "deduct" || type == "transfer" || type == "batch_deduct";
}

// The query that passes a wait on to the orchestrator.
std::string wait_query(const read_params& params) {
  return params.wait_ms ? "wait_ms=" + std::to_string(*params.wait_ms) : "";
}

std::string without_tenant(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_object()) return body;
  j.erase("tenant");
  return j.dump();
}

class router {
 public:
  router(route_context& ctx, bool internal)
      : ctx_(ctx),
        internal_(internal),
        probes_{ctx.ready, [&m = ctx.metrics] { return m.render(); }},
        requests_(ctx.metrics.add_counter("tally_gateway_requests_total", "Requests answered")),
        projection_reads_(ctx.metrics.add_counter("tally_gateway_reads_total", "Reads by source", R"(source="projection")")),
        authority_reads_(ctx.metrics.add_counter("tally_gateway_reads_total", "Reads by source", R"(source="authority")")),
        upstream_failures_(ctx.metrics.add_counter("tally_gateway_upstream_failures_total",
                                                   "Requests the orchestrator or a shard did not answer")) {}

  asio::awaitable<response> operator()(request req) {
    requests_.inc();
    const auto t = http::split_target(std::string_view(req.target().data(), req.target().size()));
    if (auto probe = http::probe_response(req, t, probes_)) co_return std::move(*probe);
    // One request id for the whole path: upstreams echo it in their errors.
    req.set(request_id_header, http::request_id_of(req));
    auto res = co_await route(req, t);
    res.set(request_id_header, req[request_id_header]);
    co_return res;
  }

 private:
  asio::awaitable<response> route(request& req, const http::target& t) {
    const auto& p = t.path;
    const auto method = req.method();
    if (internal_) {
      if (p.size() == 2 && p[0] == "internal" && p[1] == "events" && method == bhttp::verb::post)
        co_return publish(req);
      co_return not_found(req);
    }
    if (p.empty() || p[0] != "v1") co_return not_found(req);
    const auto key = req[bhttp::field::authorization];
    auto who = key.starts_with("Bearer ") ? ctx_.keys.authenticate(key.substr(7)) : std::nullopt;
    if (!who) co_return error(req, 401, "unauthorized", "missing or unknown API key");
    const bool admin = p.size() >= 2 && p[1] == "admin";
    if (!may_use(who->r, admin)) co_return error(req, 403, "forbidden", "this key's role may not use /v1/admin/");
    auto q = check_query(t.query);
    if (auto* bad = std::get_if<refusal>(&q)) co_return bad_request(req, bad->message);
    const auto& params = std::get<read_params>(q);
    if (admin) co_return co_await route_admin(req, t, *who, params);

    if (method == bhttp::verb::post && p.size() == 2) {
      auto kind = write_of_collection(p[1]);
      if (!kind) co_return not_found(req);
      co_return co_await write(req, t, *who, *kind, params);
    }
    if (method == bhttp::verb::post && p.size() == 4 && p[1] == "deductions" && (p[3] == "confirm" || p[3] == "cancel")) {
      if (auto bad = orch::check_action_body(req.body())) co_return bad_request(req, bad->message);
      if (!orch::is_saga_id(p[2])) co_return no_such_saga(req);
      if (auto refused = co_await limit(req, *who, {})) co_return std::move(*refused);
      co_return co_await to_orchestrator(req, tenant_path(*who, p, 1), t.query, params);
    }
    if (method == bhttp::verb::get && p.size() >= 3 && p[1] == "accounts") {
      if (!validate::is_valid_id(p[2])) co_return bad_request(req, "bad account id");
      if (auto refused = co_await limit(req, *who, {})) co_return std::move(*refused);
      if (p.size() == 3) co_return co_await account(req, *who, std::string(p[2]), params.strong);
      if (p.size() == 4 && p[3] == "entries") co_return co_await entries(req, *who, std::string(p[2]), params);
      if (p.size() == 4 && p[3] == "lots") co_return co_await lots(req, t, *who, std::string(p[2]), params);
    }
    if (method == bhttp::verb::get && p.size() == 3 && p[1] == "sagas") {
      if (!orch::is_saga_id(p[2])) co_return no_such_saga(req);
      if (auto refused = co_await limit(req, *who, {})) co_return std::move(*refused);
      co_return co_await saga(req, t, *who, std::string(p[2]), params);
    }
    if (method == bhttp::verb::get && p.size() == 2 && p[1] == "sagas") {
      if (auto refused = co_await limit(req, *who, {})) co_return std::move(*refused);
      co_return co_await to_orchestrator(req, tenant_path(*who, p, 1), t.query, params);
    }
    if (p.size() == 2 && p[1] == "stream") co_return bad_request(req, "GET /v1/stream is a WebSocket upgrade");
    co_return not_found(req);
  }

  asio::awaitable<response> route_admin(request& req, const http::target& t, const principal& who,
                                        const read_params& params) {
    const auto& p = t.path;
    const auto method = req.method();
    const read_params none;
    if (auto refused = co_await limit(req, who, {})) co_return std::move(*refused);
    if (method == bhttp::verb::get && p.size() == 3 && p[2] == "workflows")
      co_return co_await forward(req, ctx_.orchestrator, "the orchestrator", "/v1/workflows", "", none);
    if (p.size() >= 3 && p[2] == "sagas") {
      const bool list = method == bhttp::verb::get && p.size() == 3;
      const bool one = method == bhttp::verb::get && p.size() == 4;
      const bool act = method == bhttp::verb::post && p.size() == 5 && (p[4] == "retry" || p[4] == "abort");
      if (list) co_return co_await to_orchestrator(req, tenant_path(who, p, 1), t.query, none);
      if (one || act) {
        if (auto bad = act ? orch::check_action_body(req.body()) : std::nullopt) co_return bad_request(req, bad->message);
        if (!orch::is_saga_id(p[3])) co_return no_such_saga(req);
        // The operator endpoints promise no wait: a longer one is cut to the
        // upstream time-out, so the orchestrator answers (202 while the saga
        // runs) before the gateway would give up on it.
        read_params capped;
        if (params.wait_ms) capped.wait_ms = std::min<std::int64_t>(*params.wait_ms, ctx_.upstream_timeout.count());
        co_return co_await to_orchestrator(req, tenant_path(who, p, 1), wait_query(capped), capped);
      }
    }
    if (method == bhttp::verb::post && p.size() == 5 && p[2] == "accounts" && (p[4] == "freeze" || p[4] == "unfreeze")) {
      if (!validate::is_valid_id(p[3])) co_return bad_request(req, "bad account id");
      const std::string account_id(p[3]);
      auto& shard = shard_of(who, account_id);
      auto r = co_await forward(req, shard, "the account's shard",
                                "/v1/accounts/" + who.tenant + "/" + account_id + "/" + std::string(p[4]), "", none);
      if (r.result_int() == 200) r.body() = without_tenant(r.body());
      co_return r;
    }
    if (method == bhttp::verb::get && p.size() == 3 && p[2] == "reconciliation") {
      auto n = http::to_int(http::query_param(t.query, "shard").value_or(""));
      if (!n || *n < 0 || static_cast<std::size_t>(*n) >= ctx_.shards.size())
        co_return bad_request(req, "shard must be a shard number from 0 to " + std::to_string(ctx_.shards.size() - 1));
      co_return co_await forward(req, *ctx_.shards[static_cast<std::size_t>(*n)], "the shard",
                                 "/v1/reconciliation", "tenant=" + who.tenant, none);
    }
    if (method == bhttp::verb::get && p.size() == 3 && p[2] == "shards") co_return co_await shards(req);
    co_return not_found(req);
  }

  // /v1/a/b → /v1/tenants/{t}/a/b, from path segment `from` on.
  static std::string tenant_path(const principal& who, const std::vector<std::string>& p, std::size_t from) {
    std::string out = "/v1/tenants/" + who.tenant;
    for (auto i = from; i < p.size(); ++i) out.append(1, '/').append(http::encoded_segment(p[i]));
    return out;
  }

  http::client_pool& shard_of(const principal& who, const std::string& account_id) {
    return *ctx_.shards[ctx_.routes.shard_of(who.tenant, account_id)];
  }

  // nullopt when admitted; else the 429.
  asio::awaitable<std::optional<response>> limit(const request& req, const principal& who,
                                                 std::vector<std::string> accounts) {
    auto a = co_await ctx_.limiter.async_admit(who, accounts);
    if (a.allowed) co_return std::nullopt;
    auto res = error(req, 429, "rate_limited",
                     a.scope == "account" ? "too many requests for this account; retry later"
                                          : "too many requests for this API key; retry later");
    res.set(bhttp::field::retry_after, std::to_string(a.retry_after_s));
    co_return res;
  }

  // Sends the request on with the internal token; passes the answer back
  // (status, body, Idempotent-Replayed), or 503 when nobody answered.
  template <class Upstream>  // http::client_pool or http::failover_pool
  asio::awaitable<response> forward(const request& req, Upstream& to, std::string_view who_name,
                                    std::string path, std::string query, const read_params& params) {
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
      log::warn("upstream did not answer", {{"upstream", who_name}, {"error", r.error.message()},
                                            {"request_id", req[request_id_header]}});
      co_return unavailable(req, who_name);
    }
    const auto status = r.message.result_int();
    if (status == 401 || status == 403) {  // our token, not the caller's: a configuration fault
      upstream_failures_.inc();
      log::error("upstream refused the internal token", {{"upstream", who_name}});
      co_return unavailable(req, who_name);
    }
    auto res = http::make_json_response(req, status, std::move(r.message.body()));
    if (auto replayed = r.message.find("Idempotent-Replayed"); replayed != r.message.end())
      res.set("Idempotent-Replayed", replayed->value());
    co_return res;
  }

  asio::awaitable<response> to_orchestrator(const request& req, std::string path, std::string_view query,
                                            const read_params& params) {
    co_return co_await forward(req, ctx_.orchestrator, "the orchestrator", std::move(path), std::string(query), params);
  }

  asio::awaitable<response> write(const request& req, const http::target& t, const principal& who, write_kind kind,
                                  const read_params& params) {
    auto checked = check_write(kind, who.tenant, req.body());
    if (auto* bad = std::get_if<refusal>(&checked)) co_return bad_request(req, bad->message);
    auto& ok = std::get<accepted_write>(checked);
    if (auto refused = co_await limit(req, who, ok.accounts)) co_return std::move(*refused);
    if (kind == write_kind::open_account) co_return co_await open_account(req, who, ok.account_id);
    co_return co_await to_orchestrator(req, tenant_path(who, t.path, 1), t.query, params);
  }

  asio::awaitable<response> open_account(const request& req, const principal& who, const std::string& account_id) {
    auto& shard = shard_of(who, account_id);
    const json command{{"type", "open_account"}, {"tenant", who.tenant}, {"account_id", account_id}};
    request open(bhttp::verb::post, "/v1/commands", 11);
    open.body() = command.dump();
    open.set(request_id_header, req[request_id_header]);
    const read_params none;
    auto opened = co_await forward(open, shard, "the account's shard", "/v1/commands", "", none);
    if (opened.result_int() != 200) co_return opened;
    auto reply = json::parse(opened.body(), nullptr, false);
    if (!reply.is_object() || reply.value("status", "") != "succeeded") co_return unavailable(req, "the account's shard");
    const bool existed = reply.value("replayed", false);
    request get(bhttp::verb::get, "", 11);
    get.set(request_id_header, req[request_id_header]);
    auto r = co_await forward(get, shard, "the account's shard", "/v1/accounts/" + who.tenant + "/" + account_id, "", none);
    if (r.result_int() != 200) co_return r;
    co_return document(req, existed ? 200 : 201, without_tenant(r.body()), "authority");
  }

  // The projection's document, or nullopt (missing, or Redis unreachable).
  asio::awaitable<std::optional<std::string>> projected(std::string key) {
    auto r = co_await ctx_.redis.async_exec(redis::make_command("HGET", std::move(key), "doc"));
    if (!r.ok() || r.v.type != redis::value::kind::string) co_return std::nullopt;
    projection_reads_.inc();
    co_return std::move(r.v.text);
  }

  asio::awaitable<response> account(const request& req, const principal& who, const std::string& account_id, bool strong) {
    if (!strong) {
      if (auto doc = co_await projected(projection::account_key(who.tenant, account_id)))
        co_return document(req, 200, std::move(*doc), "projection");
    }
    authority_reads_.inc();
    const read_params none;
    auto r = co_await forward(req, shard_of(who, account_id), "the account's shard",
                              "/v1/accounts/" + who.tenant + "/" + account_id, "", none);
    if (r.result_int() == 404) co_return not_found(req, "no such account");
    if (r.result_int() == 200) co_return document(req, 200, without_tenant(r.body()), "authority");
    co_return r;
  }

  asio::awaitable<response> entries(const request& req, const principal& who, const std::string& account_id,
                                    const read_params& params) {
    co_return co_await account_page(req, who, account_id, "entries", page_query(params));
  }

  // GET /v1/accounts/{id}/lots?state=open|all&limit=&after=: from the shard, in consumption order.
  asio::awaitable<response> lots(const request& req, const http::target& t, const principal& who,
                                 const std::string& account_id, const read_params& params) {
    const auto state = http::query_param(t.query, "state").value_or("open");
    if (state != "open" && state != "all") co_return bad_request(req, "state must be open or all");
    co_return co_await account_page(req, who, account_id, "lots",
                                    "state=" + std::string(state) + "&" + page_query(params));
  }

  static std::string page_query(const read_params& params) {
    std::string query = "limit=" + std::to_string(params.limit.value_or(100));
    if (params.after) query += "&after=" + std::to_string(*params.after);
    return query;
  }

  // A page of an account's rows, read from its shard.
  asio::awaitable<response> account_page(const request& req, const principal& who, const std::string& account_id,
                                         std::string_view what, std::string query) {
    authority_reads_.inc();
    const read_params none;
    auto r = co_await forward(req, shard_of(who, account_id), "the account's shard",
                              "/v1/accounts/" + who.tenant + "/" + account_id + "/" + std::string(what),
                              std::move(query), none);
    if (r.result_int() == 404) co_return not_found(req, "no such account");
    co_return r;
  }

  asio::awaitable<response> saga(const request& req, const http::target& t, const principal& who, const std::string& id,
                                 const read_params& params) {
    if (!params.strong && !params.wait_ms) {
      auto doc = co_await projected(projection::saga_key(who.tenant, id));
      if (doc && !refundable(*doc)) co_return document(req, 200, std::move(*doc), "projection");
    }
    authority_reads_.inc();
    auto r = co_await forward(req, ctx_.orchestrator, "the orchestrator", tenant_path(who, t.path, 1), wait_query(params),
                              params);
    r.set(read_header, "authority");
    co_return r;
  }

  asio::awaitable<response> shards(const request& req) {
    auto all = json::array();
    for (std::size_t i = 0; i < ctx_.shards.size(); ++i) {
      const auto& endpoint = ctx_.routes.shards()[i];
      request status(bhttp::verb::get, "/v1/status", 11);
      status.set(bhttp::field::authorization, "Bearer " + ctx_.upstream_token);
      auto r = co_await ctx_.shards[i]->async_request(std::move(status), ctx_.upstream_timeout);
      json entry{{"shard", i}, {"name", endpoint.name}, {"buckets", ctx_.routes.buckets_of(i)}};
      if (r.error || r.message.result_int() != 200) {
        entry["health"] = "unreachable";
      } else {
        auto body = json::parse(r.message.body(), nullptr, false);
        entry["health"] = "ok";
        if (body.is_object()) entry.update(body);
      }
      all.push_back(std::move(entry));
    }
    co_return http::json_response(req, 200, {{"shards", std::move(all)}});
  }

  // The relay's events, to this gateway's subscribers.
  response publish(const request& req) {
    if (!http::bearer_token_ok(req, ctx_.internal_token))
      return error(req, 401, "unauthorized", "missing or wrong internal token");
    auto body = json::parse(req.body(), nullptr, false);
    if (!body.is_object() || !body.contains("events") || !body["events"].is_array())
      return bad_request(req, "body must be {\"events\": [...]}");
    for (const auto& e : body["events"]) {
      if (!e.is_object()) continue;
      auto kind = e.find("kind"), tenant = e.find("tenant"), id = e.find("id"), version = e.find("version"),
           doc = e.find("doc");
      if (kind == e.end() || tenant == e.end() || id == e.end() || version == e.end() || doc == e.end() ||
          !tenant->is_string() || !id->is_string() || !version->is_number_integer())
        continue;
      const bool is_saga = *kind == "saga";
      const auto topic = is_saga ? saga_topic(tenant->get_ref<const std::string&>(), id->get_ref<const std::string&>())
                                 : account_topic(tenant->get_ref<const std::string&>(), id->get_ref<const std::string&>());
      if (!ctx_.events.has(topic)) continue;
      ctx_.events.publish(topic, version->get<std::int64_t>(), std::make_shared<const std::string>(state_frame(is_saga, doc->dump())));
    }
    return http::json_response(req, 200, {{"published", body["events"].size()}});
  }

  route_context& ctx_;
  const bool internal_;
  http::service_probes probes_;
  metrics::counter& requests_;
  metrics::counter& projection_reads_;
  metrics::counter& authority_reads_;
  metrics::counter& upstream_failures_;
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::shared_handler(std::make_shared<router>(ctx, false)); }
http::handler make_internal_handler(route_context& ctx) {
  return http::shared_handler(std::make_shared<router>(ctx, true));
}

}  // namespace tally::gateway
