#pragma once
// The gateway's router (gateway/service only): its route table as data
// (method, path pattern, who may call it, handler, body limit) and the
// handlers, split
// between routes.cpp (dispatch, the app's API, static files) and
// operator_routes.cpp (/v1/admin/). Upstream calls go through forward():
// the internal token, the request id, the caller's wait added to the
// time-out, and a 503 when nobody answers.
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/http/route_table.hpp"
#include "common/http/routing.hpp"
#include "gateway/api/requests.hpp"
#include "gateway/service/routes.hpp"
#include "gateway/static/files.hpp"

namespace tally::gateway {

inline constexpr std::string_view request_id_header = "X-Request-Id";

// Who may call a route: anybody, an app key (an operator key is one too),
// or an operator key.
enum class access { anyone, app, operator_only };

// One request matched to its route.
struct call {
  const http::target& target;
  const principal* who = nullptr;  // the caller; null on access::anyone routes
  read_params params;
  std::vector<std::string> args;  // the pattern's {parameters}, in order
};

class router;
struct route_def {
  using handler_type = boost::asio::awaitable<http::response> (router::*)(http::request&, const call&);
  route_def(boost::beast::http::verb m, std::string_view p, access a, handler_type h)
      : method(m), path(p), need(a), handle(h), body_limit(http::default_body_limit(m)) {}
  route_def(boost::beast::http::verb m, std::string_view p, access a, handler_type h, http::route_body_limit limit)
      : method(m), path(p), need(a), handle(h), body_limit(limit) {}

  boost::beast::http::verb method;
  std::string_view path;  // "/v1/accounts/{id}/entries"
  access need;
  handler_type handle;
  http::route_body_limit body_limit;  // route_table.hpp
};

class router {
 public:
  explicit router(route_context& ctx);
  boost::asio::awaitable<http::response> operator()(http::request req);
  // Every route, in matching order (the first match wins).
  static const std::vector<route_def>& table();

 private:
  using awaitable_response = boost::asio::awaitable<http::response>;
  awaitable_response route(http::request& req, const http::target& t);

  // routes.cpp: the app's API and the files served without a key
  awaitable_response write(http::request& req, const call& c);
  awaitable_response confirm_or_cancel(http::request& req, const call& c);
  awaitable_response account(http::request& req, const call& c);
  awaitable_response entries(http::request& req, const call& c);
  awaitable_response lots(http::request& req, const call& c);
  awaitable_response saga(http::request& req, const call& c);
  awaitable_response sagas(http::request& req, const call& c);
  awaitable_response stream_without_upgrade(http::request& req, const call& c);
  awaitable_response console(http::request& req, const call& c);
  awaitable_response openapi(http::request& req, const call& c);
  awaitable_response probe(http::request& req, const call& c);  // /healthz, /readyz, /metrics
  awaitable_response open_account(const http::request& req, const principal& who, const std::string& account_id);
  awaitable_response account_page(const http::request& req, const principal& who, const std::string& account_id,
                                  std::string_view what, std::string query);
  http::response static_file(const http::request& req, std::string_view name);

  // operator_routes.cpp: /v1/admin/
  awaitable_response workflows(http::request& req, const call& c);
  awaitable_response admin_sagas(http::request& req, const call& c);
  awaitable_response admin_saga(http::request& req, const call& c);
  awaitable_response freeze(http::request& req, const call& c);
  awaitable_response accounts_in_status(http::request& req, const call& c);
  awaitable_response reconciliation(http::request& req, const call& c);
  awaitable_response reconciliation_reports(http::request& req, const call& c);
  awaitable_response audits(http::request& req, const call& c);
  awaitable_response shards(http::request& req, const call& c);
  awaitable_response clusters(http::request& req, const call& c);
  awaitable_response health(http::request& req, const call& c);

  // Upstreams
  template <class Upstream>  // http::client_pool or http::failover_pool
  awaitable_response forward(const http::request& req, Upstream& to, std::string_view who_name, std::string path,
                             std::string query, const read_params& params);
  awaitable_response to_orchestrator(const http::request& req, std::string path, std::string_view query,
                                     const read_params& params);
  // A GET of an upstream's path without the caller's request (probes,
  // metrics, status): the body when it answered 200.
  template <class Upstream>
  boost::asio::awaitable<std::optional<std::string>> fetch(Upstream& to, std::string target, bool with_token);
  http::client_pool& shard_of(const principal& who, const std::string& account_id);
  // nullopt when admitted; else the 429.
  boost::asio::awaitable<std::optional<http::response>> limit(const http::request& req, const principal& who,
                                                              std::vector<std::string> accounts);
  // The same for a request that names no account (the key's bucket only).
  boost::asio::awaitable<std::optional<http::response>> limit_key(const http::request& req, const principal& who);
  boost::asio::awaitable<std::optional<std::string>> projected(std::string key);

  route_context& ctx_;
  http::service_probes probes_;
  static_files files_;
  metrics::counter& requests_;
  metrics::counter& projection_reads_;
  metrics::counter& authority_reads_;
  metrics::counter& upstream_failures_;
  metrics::histogram& request_seconds_;
};

// Helpers both route files use.
using http::bad_request;
using http::not_found;
using http::request;
using http::response;
http::response no_such_saga(const http::request& req);
// /v1/a/b → /v1/tenants/{t}/a/b, from path segment `from` on.
std::string tenant_path(const principal& who, const std::vector<std::string>& p, std::size_t from);
// The query that passes a wait on to the orchestrator.
std::string wait_query(const read_params& params);
// A shard's account document without its tenant, as the API shows it.
std::string without_tenant(const std::string& body);
nlohmann::json without_tenant(nlohmann::json doc);

}  // namespace tally::gateway
