// orchestrator: runs sagas against the account shards, with its own saga
// store, and answers the gateway over internal HTTP.
//   orchestrator [--config=FILE] [--key=value ...]   serve
//   orchestrator migrate [...]                        apply migrations and exit
// Many instances may share one saga store: each drives the sagas it holds
// a lease on, and takes over those of an instance that died.
#include <cstdio>
#include <memory>
#include <random>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/config/config.hpp"
#include "common/http/server.hpp"
#include "common/log/log.hpp"
#include "common/metrics/metrics.hpp"
#include "common/service/runner.hpp"
#include "common/service/settings.hpp"
#include "orchestrator/service/routes.hpp"
#include "orchestrator/service/saga_runner.hpp"

namespace asio = boost::asio;
using namespace tally;
using std::chrono::milliseconds;

namespace {

struct settings {
  std::string conninfo;
  std::string token;
  std::string shard_token;
  std::string migrations_dir;
  http::server_options listen;
  std::string shards;
  std::size_t buckets = 1024;
  std::size_t pool = 4;
  milliseconds statement_timeout{5000};
  bool require_synchronous_standby = false;
  orch::shard_client_options shard;
  orch::runner_options runner;
  std::string instance;
};

settings read_settings(const config::config& cfg) {
  settings s;
  s.conninfo = service::required_string(cfg, "database.conninfo");
  s.token = cfg.get_secret("internal_token", 16);
  s.shard_token = cfg.get_string("shard_token", s.token);
  s.migrations_dir = cfg.get_string("migrations.dir", TALLY_MIGRATIONS_DIR "/orchestrator");
  s.listen = service::read_listen(cfg, "listen", 7001);
  s.shards = service::required_string(cfg, "shards", ", e.g. s0=127.0.0.1:7101;s1=127.0.0.1:7102");
  s.buckets = static_cast<std::size_t>(cfg.get_int("buckets", 1024));
  s.pool = static_cast<std::size_t>(cfg.get_int("database.pool", 4));
  s.statement_timeout = milliseconds(cfg.get_int("database.statement_timeout_ms", 5000));
  s.require_synchronous_standby = cfg.get_bool("database.require_synchronous_standby", false);
  s.shard.connections = static_cast<std::size_t>(cfg.get_int("shard.connections", 4));
  s.shard.max_batch = static_cast<std::size_t>(cfg.get_int("shard.max_batch", 500));
  s.shard.timeout = milliseconds(cfg.get_int("shard.timeout_ms", 2000));
  s.runner.lease = milliseconds(cfg.get_int("lease_ms", 5000));
  s.runner.claim_interval = milliseconds(cfg.get_int("claim_interval_ms", 100));
  s.runner.keep_horizon = milliseconds(cfg.get_int("keep_horizon_ms", 10000));
  s.runner.action_recheck = milliseconds(cfg.get_int("action_recheck_ms", 1000));
  s.runner.save_connections = static_cast<std::size_t>(cfg.get_int("database.save_connections", 2));
  s.runner.save_batch = static_cast<std::size_t>(cfg.get_int("database.save_batch", 256));
  s.runner.maintenance.interval = milliseconds(cfg.get_int("maintenance_interval_ms", 60000));
  s.runner.maintenance.detail_retention =
      milliseconds(cfg.get_int("saga_detail_retention_ms", std::int64_t{30} * 24 * 3600 * 1000));
  s.runner.maintenance.compact_page = static_cast<std::size_t>(cfg.get_int("compact_page", 500));
  if (s.runner.maintenance.interval.count() <= 0 || s.runner.maintenance.detail_retention.count() < 0 ||
      s.runner.maintenance.compact_page == 0)
    throw std::runtime_error("maintenance_interval_ms and compact_page must be >= 1, saga_detail_retention_ms >= 0");
  if (s.runner.save_connections + 2 > s.pool)
    throw std::runtime_error("database.pool must exceed database.save_connections by at least 2");
  // The lease owner must name this process, not just its place: a restarted
  // instance with the old name would find its predecessor's leases "alive"
  // (it renews the same heartbeat row) and never drive those sagas. In a
  // container host, pid and port repeat, so a random suffix is always added.
  std::random_device entropy;
  char incarnation[9];
  std::snprintf(incarnation, sizeof incarnation, "%08x", entropy());
  s.instance =
      cfg.get_string("instance", service::host_name() + ":" + std::to_string(s.listen.port)) + ":" + incarnation;
  return s;
}

struct app : service::app {
  app(asio::io_context& io, settings s, sharding::routing_table routes)
      : io_(io),
        s_(std::move(s)),
        routes_(std::move(routes)),
        pool_(io.get_executor(), pool_options()),
        store_(pool_, s_.instance, s_.runner.lease, s_.statement_timeout, s_.require_synchronous_standby) {
    for (const auto& e : routes_.shards())
      shards_.push_back(std::make_unique<orch::shard_client>(io.get_executor(), e, s_.shard_token, s_.shard));
    runner_ = std::make_unique<orch::saga_runner>(io.get_executor(), store_, routes_, shards_, metrics_, s_.runner);
    ctx_ = std::make_unique<orch::route_context>(orch::route_context{
        {{[this] { return !stopping(); }, [this] { return metrics_.render(); }}, s_.token}, *runner_, store_});
  }

  pg::pool_options pool_options() const {
    pg::pool_options o;
    o.conninfo = s_.conninfo;
    o.max_size = s_.pool;
    o.session_sql = pg::batch_writer_session_sql;
    return o;
  }

  asio::awaitable<void> async_start() override {
    if (auto err = co_await runner_->async_open()) throw std::runtime_error("saga store: " + err.message);
    runner_->start();
    server_ = std::make_unique<http::server>(io_, s_.listen, orch::make_handler(*ctx_), orch::body_limits());
    server_->start();
    log::info("serving", {{"address", s_.listen.address},
                          {"port", server_->port()},
                          {"instance", s_.instance},
                          {"shards", routes_.shards().size()},
                          {"buckets", routes_.buckets()}});
  }

  asio::awaitable<void> async_stop() override {
    log::info("shutting down: finishing in-flight requests and saga steps");
    if (server_) co_await server_->async_shutdown(std::chrono::seconds(10));
    co_await runner_->async_stop(std::chrono::seconds(5));
    log::info("stopped");
  }

  asio::io_context& io_;
  settings s_;
  sharding::routing_table routes_;
  metrics::registry metrics_;
  pg::pool pool_;
  orch::saga_store store_;
  std::vector<std::unique_ptr<orch::shard_client>> shards_;
  std::unique_ptr<orch::saga_runner> runner_;  // destroyed before the shard clients it calls
  std::unique_ptr<orch::route_context> ctx_;
  std::unique_ptr<http::server> server_;
};

}  // namespace

int main(int argc, char** argv) {
  return service::run("orchestrator", "TALLY_ORCH", argc, argv,
                      [&](asio::io_context& io, const config::config& cfg) -> std::unique_ptr<service::app> {
                        settings s = read_settings(cfg);
                        auto routes = service::required(sharding::routing_table::parse(s.shards, s.buckets), "shards");
                        if (service::apply_migrations(argc, argv, s.conninfo, s.migrations_dir)) return nullptr;
                        return std::make_unique<app>(io, std::move(s), std::move(routes));
                      });
}
