// gateway: the public HTTP + WebSocket API (shared/API.md).
//   gateway [--config=FILE] [--key=value ...]
//   gateway --routes        prints every public route as JSON and exits
// Stateless: any number may run behind a load balancer. Writes go to the
// orchestrator or the owning shard, reads come from the Redis projections
// (or the authority), rate limits live in Redis, and WebSocket subscribers
// get the events the relay pushes to this gateway.
#include <iostream>
#include <memory>
#include <optional>
#include <string_view>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "common/config/config.hpp"
#include "common/http/failover_pool.hpp"
#include "common/http/server.hpp"
#include "common/log/log.hpp"
#include "common/metrics/metrics.hpp"
#include "common/redis/client.hpp"
#include "common/service/runner.hpp"
#include "common/service/settings.hpp"
#include "common/sharding/routing.hpp"
#include "gateway/auth/api_keys.hpp"
#include "gateway/limit/rate_limiter.hpp"
#include "gateway/service/routes.hpp"
#include "gateway/stream/hub.hpp"
#include "gateway/stream/session.hpp"

namespace asio = boost::asio;
using namespace tally;
using std::chrono::milliseconds;

namespace {

struct settings {
  gateway::api_keys keys;
  std::string token;
  std::string upstream_token;
  http::server_options listen{};
  http::server_options internal{};
  std::vector<http::upstream_endpoint> orchestrators;  // instances sharing one saga store
  std::string shards;
  std::size_t buckets = 1024;
  std::size_t orchestrator_connections = 512;
  std::size_t shard_connections = 64;
  milliseconds upstream_timeout{5000};
  redis::client_options redis;
  gateway::rate_limits limits;
  gateway::stream_options stream;
  std::optional<http::upstream_endpoint> relay;  // for the operators' health page
  std::string console_dir;
  std::string ha_monitor;  // pg_auto_failover's monitor: the clusters' view (docs/ha.md)
  milliseconds ha_poll{2000};
};

gateway::bucket_limit read_limit(const config::config& cfg, const std::string& name, gateway::bucket_limit fallback) {
  gateway::bucket_limit l;
  l.rate = static_cast<double>(cfg.get_int("limits." + name + "_rate", static_cast<std::int64_t>(fallback.rate)));
  l.burst = static_cast<double>(cfg.get_int("limits." + name + "_burst", static_cast<std::int64_t>(fallback.burst)));
  if (l.rate <= 0 || l.burst < 1) throw std::runtime_error("limits." + name + ": rate must be > 0 and burst >= 1");
  return l;
}

// `host:port[,host:port...]`: instances of the orchestrator, tried in turn.
std::vector<http::upstream_endpoint> read_orchestrators(const std::string& list) {
  std::string spec;
  std::size_t n = 0;
  for (std::size_t from = 0; from <= list.size();) {
    const auto comma = std::min(list.find(',', from), list.size());
    spec += (n ? ";o" : "o") + std::to_string(n) + "=" + list.substr(from, comma - from);
    ++n;
    from = comma + 1;
  }
  std::vector<http::upstream_endpoint> out;
  for (const auto& e : service::required(sharding::parse_endpoints(spec), "orchestrator"))
    out.push_back({e.host, e.port});
  return out;
}

settings read_settings(const config::config& cfg) {
  settings s;
  const auto keys = service::required_string(cfg, "api_keys", ": tenant:role:sha256hex;...");
  s.keys = service::required(gateway::api_keys::parse(keys), "api_keys");
  s.token = cfg.get_secret("internal_token", 16);
  s.upstream_token = cfg.get_string("upstream_token", s.token);
  s.listen = service::read_listen(cfg, "listen", 8080);
  s.listen.header_timeout = milliseconds(cfg.get_int("listen.header_timeout_ms", 5000));
  s.listen.read_timeout = milliseconds(cfg.get_int("listen.read_timeout_ms", 10000));
  s.listen.idle_timeout = milliseconds(cfg.get_int("listen.idle_timeout_ms", 60000));
  // The relay's pushes: loopback, and batches far larger than a public request.
  s.internal = service::read_listen(cfg, "internal", 8081);
  s.internal.body_limit = static_cast<std::size_t>(cfg.get_int("internal.body_limit", 16 * 1024 * 1024));
  s.orchestrators = read_orchestrators(cfg.get_string("orchestrator", "127.0.0.1:7001"));
  s.shards = service::required_string(cfg, "shards", ", the orchestrator's routing");
  s.buckets = static_cast<std::size_t>(cfg.get_int("buckets", 1024));
  s.orchestrator_connections = static_cast<std::size_t>(cfg.get_int("upstream.orchestrator_connections", 512));
  s.shard_connections = static_cast<std::size_t>(cfg.get_int("upstream.shard_connections", 64));
  s.upstream_timeout = milliseconds(cfg.get_int("upstream.timeout_ms", 5000));
  s.redis.host = cfg.get_string("redis.host", "127.0.0.1");
  s.redis.port = static_cast<std::uint16_t>(cfg.get_int("redis.port", 6379));
  s.redis.timeout = milliseconds(cfg.get_int("redis.timeout_ms", 200));
  s.limits.per_key = read_limit(cfg, "key", s.limits.per_key);
  s.limits.per_account = read_limit(cfg, "account", s.limits.per_account);
  s.stream.ping_interval = milliseconds(cfg.get_int("stream.ping_interval_ms", 20000));
  if (auto port = cfg.get_int("relay.port", 0); port > 0)
    s.relay = http::upstream_endpoint{cfg.get_string("relay.host", "127.0.0.1"), static_cast<std::uint16_t>(port)};
  s.console_dir = cfg.get_string("console.dir", "");
  s.ha_monitor = cfg.get_string("ha.monitor", "");
  s.ha_poll = milliseconds(cfg.get_int("ha.poll_ms", 2000));
  if (s.ha_poll.count() < 100) throw std::runtime_error("ha.poll_ms must be at least 100");
  return s;
}

struct app : service::app {
  app(asio::io_context& io, settings s, sharding::routing_table routes)
      : io_(io),
        s_(std::move(s)),
        routes_(std::move(routes)),
        redis_(io.get_executor(), s_.redis),
        limiter_(redis_, s_.limits, metrics_),
        orchestrator_(io.get_executor(), s_.orchestrators, s_.orchestrator_connections),
        streams_(hub_, s_.keys, redis_, metrics_, s_.stream) {
    for (const auto& e : routes_.shards())
      shards_.push_back(std::make_unique<http::client_pool>(io.get_executor(), e.host, e.port, s_.shard_connections));
    if (s_.relay) relay_ = std::make_unique<http::client_pool>(io.get_executor(), s_.relay->host, s_.relay->port, 2);
    if (!s_.ha_monitor.empty())
      clusters_ = std::make_unique<gateway::cluster_watch>(io.get_executor(), s_.ha_monitor, s_.ha_poll, metrics_);
    ctx_ = std::make_unique<gateway::route_context>(gateway::route_context{
        s_.keys, limiter_, redis_, hub_, orchestrator_, shards_, routes_, s_.upstream_token, s_.token, metrics_,
        [this] { return !stopping(); }, s_.upstream_timeout, relay_.get(), s_.console_dir, clusters_.get()});
  }

  asio::awaitable<void> async_start() override {
    server_ = std::make_unique<http::server>(io_, s_.listen, gateway::make_handler(*ctx_), gateway::body_limits());
    server_->set_upgrade_handler([this](boost::beast::tcp_stream stream, http::request req) {
      if (stopping()) return;
      streams_.accept(std::move(stream), std::move(req));
    });
    server_->start();
    internal_ = std::make_unique<http::server>(io_, s_.internal, gateway::make_internal_handler(*ctx_));
    internal_->start();
    if (clusters_) asio::co_spawn(io_, clusters_->async_run(), asio::detached);
    log::info("serving", {{"address", s_.listen.address},
                          {"port", server_->port()},
                          {"internal_port", internal_->port()},
                          {"api_keys", s_.keys.size()},
                          {"shards", routes_.shards().size()}});
    co_return;
  }

  asio::awaitable<void> async_stop() override {
    log::info("shutting down: finishing in-flight requests");
    streams_.close_all();
    if (clusters_) clusters_->stop();
    if (server_) co_await server_->async_shutdown(std::chrono::seconds(10));
    if (internal_) co_await internal_->async_shutdown(std::chrono::seconds(2));
    log::info("stopped");
  }

  asio::io_context& io_;
  settings s_;
  sharding::routing_table routes_;
  metrics::registry metrics_;
  redis::client redis_;
  gateway::rate_limiter limiter_;
  http::failover_pool orchestrator_;
  std::vector<std::unique_ptr<http::client_pool>> shards_;
  std::unique_ptr<http::client_pool> relay_;
  std::unique_ptr<gateway::cluster_watch> clusters_;
  gateway::hub hub_;
  gateway::stream_service streams_;
  std::unique_ptr<gateway::route_context> ctx_;
  std::unique_ptr<http::server> server_;
  std::unique_ptr<http::server> internal_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--routes") {
    std::cout << gateway::route_list().dump(2) << "\n";
    return 0;
  }
  return service::run("gateway", "TALLY_GATEWAY", argc, argv,
                      [](asio::io_context& io, const config::config& cfg) -> std::unique_ptr<service::app> {
                        auto s = read_settings(cfg);
                        auto routes = service::required(sharding::routing_table::parse(s.shards, s.buckets), "shards");
                        return std::make_unique<app>(io, std::move(s), std::move(routes));
                      });
}
