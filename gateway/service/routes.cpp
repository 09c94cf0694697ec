#include "gateway/service/routes.hpp"

#include <variant>

#include <nlohmann/json.hpp>

#include "common/contract/errors.hpp"
#include "common/contract/shard_protocol.hpp"
#include "common/contract/saga_id.hpp"
#include "common/contract/saga_request.hpp"
#include "common/http/route_match.hpp"
#include "common/http/route_table.hpp"
#include "common/log/log.hpp"
#include "common/projection/keys.hpp"
#include "common/validate/fields.hpp"
#include "gateway/service/router.hpp"
#include "gateway/stream/messages.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using nlohmann::json;

namespace {

constexpr std::string_view read_header = "X-Tally-Read";

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
  const auto type = contract::saga_type_from(j.value("type", ""));
  return type && contract::is_refundable(*type);
}

std::string page_query(const read_params& params) {
  std::string query = "limit=" + std::to_string(params.limit.value_or(100));
  if (params.after) query += "&after=" + std::to_string(*params.after);
  return query;
}

}  // namespace

// Whatever its format: what is no saga id names no saga.
response no_such_saga(const request& req) { return not_found(req, "no such saga"); }

json without_tenant(json doc) {
  if (doc.is_object()) doc.erase("tenant");
  return doc;
}
std::string without_tenant(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  return j.is_object() ? without_tenant(std::move(j)).dump() : body;
}

// ---- the table -------------------------------------------------------------

// Bodies: a GET reads none, an action (confirm, cancel, retry, abort,
// freeze) `{}` or nothing, a write up to the server's 64 KiB (API.md).
const std::vector<route_def>& router::table() {
  using v = bhttp::verb;
  using a = access;
  constexpr auto action = http::action_body_limit;
  static const std::vector<route_def> routes = {
      {v::get, "/healthz", a::anyone, &router::probe},
      {v::get, "/readyz", a::anyone, &router::probe},
      {v::get, "/metrics", a::anyone, &router::probe},
      {v::get, "/console", a::anyone, &router::console},
      {v::get, "/console/{file...}", a::anyone, &router::console},
      {v::get, "/v1/openapi.yaml", a::anyone, &router::openapi},
      {v::post, "/v1/accounts", a::app, &router::write},
      {v::get, "/v1/accounts/{account_id}", a::app, &router::account},
      {v::get, "/v1/accounts/{account_id}/entries", a::app, &router::entries},
      {v::get, "/v1/accounts/{account_id}/lots", a::app, &router::lots},
      {v::post, "/v1/credits", a::app, &router::write},
      {v::post, "/v1/deductions", a::app, &router::write},
      {v::post, "/v1/deductions/{saga_id}/confirm", a::app, &router::confirm_or_cancel, action},
      {v::post, "/v1/deductions/{saga_id}/cancel", a::app, &router::confirm_or_cancel, action},
      {v::post, "/v1/refunds", a::app, &router::write},
      {v::post, "/v1/transfers", a::app, &router::write},
      {v::post, "/v1/batch-deductions", a::app, &router::write},
      {v::get, "/v1/sagas", a::app, &router::sagas},
      {v::get, "/v1/sagas/{saga_id}", a::app, &router::saga},
      {v::get, "/v1/stream", a::app, &router::stream_without_upgrade},
      {v::get, "/v1/admin/workflows", a::operator_only, &router::workflows},
      {v::get, "/v1/admin/sagas", a::operator_only, &router::admin_sagas},
      {v::get, "/v1/admin/sagas/counts", a::operator_only, &router::admin_sagas},
      {v::get, "/v1/admin/sagas/{saga_id}", a::operator_only, &router::admin_saga},
      {v::post, "/v1/admin/sagas/{saga_id}/retry", a::operator_only, &router::admin_saga, action},
      {v::post, "/v1/admin/sagas/{saga_id}/abort", a::operator_only, &router::admin_saga, action},
      {v::get, "/v1/admin/accounts", a::operator_only, &router::accounts_in_status},
      {v::post, "/v1/admin/accounts/{account_id}/freeze", a::operator_only, &router::freeze, action},
      {v::post, "/v1/admin/accounts/{account_id}/unfreeze", a::operator_only, &router::freeze, action},
      {v::get, "/v1/admin/reconciliation", a::operator_only, &router::reconciliation},
      {v::get, "/v1/admin/reconciliation/reports", a::operator_only, &router::reconciliation_reports},
      {v::post, "/v1/admin/audits", a::operator_only, &router::audits, action},
      {v::get, "/v1/admin/audits", a::operator_only, &router::audits},
      {v::get, "/v1/admin/audits/{audit_id}", a::operator_only, &router::audits},
      {v::post, "/v1/admin/audits/{audit_id}/cancel", a::operator_only, &router::audits, action},
      {v::get, "/v1/admin/shards", a::operator_only, &router::shards},
      {v::get, "/v1/admin/clusters", a::operator_only, &router::clusters},
      {v::get, "/v1/admin/health", a::operator_only, &router::health},
  };
  return routes;
}

json route_list() {
  auto out = http::list_routes(std::span<const route_def>(router::table()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto need = router::table()[i].need;
    out[i]["access"] = need == access::anyone ? "anyone" : need == access::app ? "app" : "operator";
  }
  return out;
}

// ---- dispatch --------------------------------------------------------------

router::router(route_context& ctx)
    : ctx_(ctx),
      probes_{ctx.ready, [&m = ctx.metrics] { return m.render(); }},
      files_(ctx.console_dir),
      requests_(ctx.metrics.add_counter("tally_gateway_requests_total", "Requests answered")),
      projection_reads_(
          ctx.metrics.add_counter("tally_gateway_reads_total", "Reads by source", R"(source="projection")")),
      authority_reads_(
          ctx.metrics.add_counter("tally_gateway_reads_total", "Reads by source", R"(source="authority")")),
      upstream_failures_(ctx.metrics.add_counter("tally_gateway_upstream_failures_total",
                                                 "Requests the orchestrator or a shard did not answer")),
      request_seconds_(ctx.metrics.add_histogram("tally_gateway_request_seconds",
                                                 "Time from a request read to its answer (waits included)",
                                                 metrics::latency_bounds())) {}

asio::awaitable<response> router::operator()(request req) {
  requests_.inc();
  const auto started = std::chrono::steady_clock::now();
  const auto t = http::split_target(std::string_view(req.target().data(), req.target().size()));
  // One request id for the whole path: upstreams echo it in their errors.
  req.set(request_id_header, http::request_id_of(req));
  auto res = co_await route(req, t);
  res.set(request_id_header, req[request_id_header]);
  request_seconds_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  co_return res;
}

asio::awaitable<response> router::route(request& req, const http::target& t) {
  auto match = http::find_route(std::span<const route_def>(table()), req.method(), t.path);
  const route_def* found = match.route;
  auto args = std::move(match.args);
  // Calls are named: GCC 12 miscompiles a braced temporary in a co_await operand.
  if (found && found->need == access::anyone) {
    const call open{t, nullptr, {}, std::move(args)};
    co_return co_await (this->*found->handle)(req, open);
  }
  const auto& p = t.path;
  if (p.empty() || p[0] != "v1") co_return not_found(req);
  const auto key = req[bhttp::field::authorization];
  auto who = key.starts_with("Bearer ") ? ctx_.keys.authenticate(key.substr(7)) : std::nullopt;
  if (!who) co_return http::make_error_response(req, contract::error_code::unauthorized, "missing or unknown API key");
  // Everything under /v1/admin/ is for operators, routes or not.
  const bool admin = found ? found->need == access::operator_only : p.size() >= 2 && p[1] == "admin";
  if (!may_use(who->r, admin))
    co_return http::make_error_response(req, contract::error_code::forbidden, "this key's role may not use /v1/admin/");
  if (!found) co_return not_found(req);
  auto q = check_query(t.query);
  if (auto* bad = std::get_if<refusal>(&q)) co_return bad_request(req, bad->message);
  if (admin) {
    if (auto refused = co_await limit_key(req, *who)) co_return std::move(*refused);
  }
  const call authenticated{t, &*who, std::get<read_params>(q), std::move(args)};
  co_return co_await (this->*found->handle)(req, authenticated);
}

// ---- files served without a key -----------------------------------------

response router::static_file(const request& req, std::string_view name) {
  auto f = files_.find(name);
  if (!f) return not_found(req, "no such file");
  auto res = http::make_json_response(req, 200, std::move(f->body));
  res.set(bhttp::field::content_type, f->content_type);
  res.set(bhttp::field::cache_control, "no-cache");
  return res;
}

asio::awaitable<response> router::console(request& req, const call& c) {
  if (c.args.empty()) {
    // "/console" and "/console/" split alike; relative links need the slash.
    if (!std::string_view(req.target().data(), req.target().size()).starts_with("/console/")) {
      response res{bhttp::status::moved_permanently, req.version()};
      res.set(bhttp::field::location, "/console/");
      res.keep_alive(req.keep_alive());
      co_return res;
    }
    co_return static_file(req, "console/index.html");
  }
  co_return static_file(req, "console/" + c.args[0]);
}

asio::awaitable<response> router::openapi(request& req, const call&) { co_return static_file(req, "openapi.yaml"); }

asio::awaitable<response> router::probe(request& req, const call& c) {
  co_return *http::probe_response(req, c.target, probes_);
}

// ---- the app's API ----------------------------------------------------------

asio::awaitable<response> router::write(request& req, const call& c) {
  const auto kind = *write_of_collection(c.target.path[1]);
  const auto& who = *c.who;
  auto checked = check_write(kind, who.tenant, req.body());
  if (auto* bad = std::get_if<refusal>(&checked)) co_return bad_request(req, bad->message);
  auto& ok = std::get<accepted_write>(checked);
  if (auto refused = co_await limit(req, who, ok.accounts)) co_return std::move(*refused);
  if (kind == write_kind::open_account) co_return co_await open_account(req, who, ok.account_id);
  req.body() = contract::to_canonical_json(*ok.saga).dump();
  co_return co_await to_orchestrator(req, "/v1/sagas", c.target.query, c.params);
}

asio::awaitable<response> router::confirm_or_cancel(request& req, const call& c) {
  if (auto bad = contract::check_action_body(req.body())) co_return bad_request(req, bad->message);
  if (!contract::is_saga_id(c.args[0])) co_return no_such_saga(req);
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  co_return co_await to_orchestrator(req, tenant_path(*c.who, c.target.path, 1), c.target.query, c.params);
}

asio::awaitable<response> router::open_account(const request& req, const principal& who,
                                               const std::string& account_id) {
  auto& shard = shard_of(who, account_id);
  request open(bhttp::verb::post, "/v1/commands", 11);
  open.body() = contract::to_json(contract::open_account_command(who.tenant, account_id)).dump();
  open.set(request_id_header, req[request_id_header]);
  const read_params none;
  auto opened = co_await forward(open, shard, "the account's shard", "/v1/commands", "", none);
  // A shard's 503 may say outcome_unknown: to the app every 503 is "unavailable, retry".
  if (opened.result_int() == 503)
    co_return http::make_error_response(req, contract::error_code::unavailable,
                                        "the account's shard is unavailable; retry (with the same biz_id for a write)");
  if (opened.result_int() != 200) co_return opened;
  auto reply = contract::parse_shard_reply(json::parse(opened.body(), nullptr, false));
  auto* opened_reply = std::get_if<contract::shard_reply>(&reply);
  if (!opened_reply || opened_reply->status != contract::shard_reply_status::succeeded)
    co_return http::make_error_response(req, contract::error_code::unavailable,
                                        "the account's shard is unavailable; retry (with the same biz_id for a write)");
  const bool existed = opened_reply->replayed;
  request get(bhttp::verb::get, "", 11);
  get.set(request_id_header, req[request_id_header]);
  auto r =
      co_await forward(get, shard, "the account's shard", "/v1/accounts/" + who.tenant + "/" + account_id, "", none);
  if (r.result_int() != 200) co_return r;
  co_return document(req, existed ? 200 : 201, without_tenant(r.body()), "authority");
}

// The projection's document, or nullopt (missing, or Redis unreachable).
asio::awaitable<std::optional<std::string>> router::projected(std::string key) {
  auto r = co_await ctx_.redis.async_exec(redis::make_command("HGET", std::move(key), "doc"));
  if (!r.ok() || r.v.type != redis::value::kind::string) co_return std::nullopt;
  projection_reads_.inc();
  co_return std::move(r.v.text);
}

asio::awaitable<response> router::account(request& req, const call& c) {
  const auto& id = c.args[0];
  if (!validate::is_valid_id(id)) co_return bad_request(req, "bad account id");
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  if (!c.params.strong) {
    if (auto doc = co_await projected(projection::account_key(c.who->tenant, id)))
      co_return document(req, 200, std::move(*doc), "projection");
  }
  authority_reads_.inc();
  const read_params none;
  auto r = co_await forward(req, shard_of(*c.who, id), "the account's shard",
                            "/v1/accounts/" + c.who->tenant + "/" + id, "", none);
  if (r.result_int() == 404) co_return not_found(req, "no such account");
  if (r.result_int() == 200) co_return document(req, 200, without_tenant(r.body()), "authority");
  co_return r;
}

asio::awaitable<response> router::entries(request& req, const call& c) {
  if (!validate::is_valid_id(c.args[0])) co_return bad_request(req, "bad account id");
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  co_return co_await account_page(req, *c.who, c.args[0], "entries", page_query(c.params));
}

// GET /v1/accounts/{id}/lots?state=open|all&limit=&after=: from the shard, in consumption order.
asio::awaitable<response> router::lots(request& req, const call& c) {
  if (!validate::is_valid_id(c.args[0])) co_return bad_request(req, "bad account id");
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  const auto state = http::query_param(c.target.query, "state").value_or("open");
  if (state != "open" && state != "all") co_return bad_request(req, "state must be open or all");
  co_return co_await account_page(req, *c.who, c.args[0], "lots",
                                  "state=" + std::string(state) + "&" + page_query(c.params));
}

// A page of an account's rows, read from its shard.
asio::awaitable<response> router::account_page(const request& req, const principal& who, const std::string& account_id,
                                               std::string_view what, std::string query) {
  authority_reads_.inc();
  const read_params none;
  auto r = co_await forward(req, shard_of(who, account_id), "the account's shard",
                            "/v1/accounts/" + who.tenant + "/" + account_id + "/" + std::string(what), std::move(query),
                            none);
  if (r.result_int() == 404) co_return not_found(req, "no such account");
  co_return r;
}

asio::awaitable<response> router::saga(request& req, const call& c) {
  const auto& id = c.args[0];
  if (!contract::is_saga_id(id)) co_return no_such_saga(req);
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  if (!c.params.strong && !c.params.wait_ms) {
    auto doc = co_await projected(projection::saga_key(c.who->tenant, id));
    if (doc && !refundable(*doc)) co_return document(req, 200, std::move(*doc), "projection");
  }
  authority_reads_.inc();
  auto r = co_await forward(req, ctx_.orchestrator, "the orchestrator", tenant_path(*c.who, c.target.path, 1),
                            wait_query(c.params), c.params);
  r.set(read_header, "authority");
  co_return r;
}

asio::awaitable<response> router::sagas(request& req, const call& c) {
  if (auto refused = co_await limit_key(req, *c.who)) co_return std::move(*refused);
  co_return co_await to_orchestrator(req, tenant_path(*c.who, c.target.path, 1), c.target.query, c.params);
}

asio::awaitable<response> router::stream_without_upgrade(request& req, const call&) {
  co_return bad_request(req, "GET /v1/stream is a WebSocket upgrade");
}

// ---- the internal listener: the relay's events -------------------------------

namespace {

class internal_router {
 public:
  explicit internal_router(route_context& ctx)
      : ctx_(ctx), probes_{ctx.ready, [&m = ctx.metrics] { return m.render(); }} {}

  asio::awaitable<response> operator()(request req) {
    const auto t = http::split_target(std::string_view(req.target().data(), req.target().size()));
    if (auto probe = http::probe_response(req, t, probes_)) co_return std::move(*probe);
    req.set(request_id_header, http::request_id_of(req));
    auto res = http::match_path("/internal/events", t.path) && req.method() == bhttp::verb::post ? publish(req)
                                                                                                 : not_found(req);
    res.set(request_id_header, req[request_id_header]);
    co_return res;
  }

 private:
  // The relay's events, to this gateway's subscribers.
  response publish(const request& req) {
    if (!http::bearer_token_ok(req, ctx_.internal_token))
      return http::make_error_response(req, contract::error_code::unauthorized, "missing or wrong internal token");
    auto body = json::parse(req.body(), nullptr, false);
    if (!body.is_object() || !body.contains("events") || !body["events"].is_array())
      return bad_request(req, "body must be {\"events\": [...]}");
    const auto resync_field = body.find("resync");
    if (resync_field != body.end() && !resync_field->is_boolean()) return bad_request(req, "resync must be a boolean");
    const bool resync = resync_field != body.end() && resync_field->get<bool>();
    for (const auto& e : body["events"]) {
      if (!e.is_object()) continue;
      auto kind = e.find("kind"), tenant = e.find("tenant"), id = e.find("id"), version = e.find("version"),
           doc = e.find("doc");
      if (kind == e.end() || tenant == e.end() || id == e.end() || version == e.end() || doc == e.end() ||
          !tenant->is_string() || !id->is_string() || !version->is_number_integer())
        continue;
      const bool is_saga = *kind == "saga";
      const auto topic = is_saga
                             ? saga_topic(tenant->get_ref<const std::string&>(), id->get_ref<const std::string&>())
                             : account_topic(tenant->get_ref<const std::string&>(), id->get_ref<const std::string&>());
      if (!ctx_.events.has(topic)) continue;
      ctx_.events.publish(topic, version->get<std::int64_t>(),
                          std::make_shared<const std::string>(state_frame(is_saga, doc->dump())), resync);
    }
    return http::json_response(req, 200, {{"published", body["events"].size()}});
  }

  route_context& ctx_;
  http::service_probes probes_;
};

}  // namespace

http::handler make_handler(route_context& ctx) { return http::shared_handler(std::make_shared<router>(ctx)); }
http::body_limit_rule body_limits() { return http::body_limits_of(std::span<const route_def>(router::table())); }
http::handler make_internal_handler(route_context& ctx) {
  return http::shared_handler(std::make_shared<internal_router>(ctx));
}

}  // namespace tally::gateway
