// relay: delivers the outbox events of every shard and of the orchestrator
// to the Redis read projections and to each gateway's WebSocket fan-out.
//   relay [--config=FILE] [--key=value ...]
// Several instances may run: each source → sink consumer is delivered by
// whichever instance holds its lock in the source database; the others
// stand by and take over when it dies.
#include <functional>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/config/config.hpp"
#include "common/http/server.hpp"
#include "common/log/log.hpp"
#include "common/metrics/metrics.hpp"
#include "common/redis/client.hpp"
#include "common/service/runner.hpp"
#include "common/service/settings.hpp"
#include "common/sharding/routing.hpp"
#include "relay/service/feed.hpp"
#include "relay/service/pruner.hpp"
#include "relay/service/pump.hpp"
#include "relay/service/routes.hpp"
#include "relay/sink/projection_sink.hpp"
#include "relay/sink/push_sink.hpp"

namespace asio = boost::asio;
using namespace tally;
using std::chrono::milliseconds;

namespace {

struct settings {
  std::vector<relay::source_config> sources;
  std::vector<sharding::shard_endpoint> gateways;
  std::string token;
  std::string gateway_token;
  http::server_options listen;
  redis::client_options redis;
  relay::pump_options pump;
  relay::feed_options feed;
  relay::prune_options prune;
  milliseconds push_timeout{2000};
  milliseconds saga_projection_ttl{86400000};
};

settings read_settings(const config::config& cfg) {
  settings s;
  auto sources = service::required_string(cfg, "sources", ": a JSON array of {name, kind, conninfo}");
  s.sources = service::required(relay::parse_sources(nlohmann::json::parse(sources, nullptr, false)), "sources");
  if (auto gateways = cfg.get_string("gateways", ""); !gateways.empty())
    s.gateways = service::required(sharding::parse_endpoints(gateways), "gateways");
  s.token = cfg.get_secret("internal_token", 16);
  s.gateway_token = cfg.get_string("gateway_token", s.token);
  s.listen = service::read_listen(cfg, "listen", 7301);
  s.redis.host = cfg.get_string("redis.host", "127.0.0.1");
  s.redis.port = static_cast<std::uint16_t>(cfg.get_int("redis.port", 6379));
  s.redis.timeout = milliseconds(cfg.get_int("redis.timeout_ms", 1000));
  s.feed.batch = static_cast<std::size_t>(cfg.get_int("batch", 500));
  s.feed.pending_max = milliseconds(cfg.get_int("idle_poll_max_ms", 50));
  s.feed.fallback = milliseconds(cfg.get_int("wake_fallback_ms", 1000));
  s.feed.read_interval = milliseconds(cfg.get_int("read_interval_ms", 10));
  s.feed.horizon_scan = s.pump.horizon_scan = milliseconds(cfg.get_int("horizon_scan_ms", 100));
  s.pump.standby_poll = milliseconds(cfg.get_int("standby_poll_ms", 500));
  s.pump.retry_max = milliseconds(cfg.get_int("retry_max_ms", 5000));
  s.pump.rebuild_page = static_cast<std::size_t>(cfg.get_int("rebuild_page", 500));
  if (s.pump.rebuild_page == 0) throw std::runtime_error("rebuild_page must be at least 1");
  s.push_timeout = milliseconds(cfg.get_int("push_timeout_ms", 2000));
  s.saga_projection_ttl = milliseconds(cfg.get_int("saga_projection_ttl_ms", 86400000));
  s.prune.min_age = milliseconds(cfg.get_int("outbox_min_age_ms", 3600000));
  s.prune.interval = milliseconds(cfg.get_int("prune_interval_ms", 10000));
  s.prune.batch = static_cast<std::size_t>(cfg.get_int("prune_batch", 5000));
  if (s.saga_projection_ttl.count() < 0 || s.prune.min_age.count() < 0 || s.prune.interval.count() <= 0 ||
      s.prune.batch == 0)
    throw std::runtime_error(
        "saga_projection_ttl_ms and outbox_min_age_ms must be >= 0, prune_interval_ms and"
        " prune_batch >= 1");
  return s;
}

struct app : service::app {
  app(asio::io_context& io, settings s)
      : io_(io), s_(std::move(s)), redis_(io.get_executor(), s_.redis), all_stopped_(io) {
    sinks_.push_back(std::make_unique<relay::projection_sink>(redis_, s_.saga_projection_ttl));
    for (const auto& g : s_.gateways) {
      sinks_.push_back(std::make_unique<relay::push_sink>(io.get_executor(), "push:" + g.name, g.host, g.port,
                                                          s_.gateway_token, s_.push_timeout));
    }
    for (const auto& source : s_.sources) {
      feeds_.push_back(std::make_unique<relay::source_feed>(io.get_executor(), source, metrics_, s_.feed));
      std::vector<std::string> consumers;
      for (const auto& sink : sinks_) {
        pumps_.push_back(std::make_unique<relay::pump>(io.get_executor(), *feeds_.back(), *sink, metrics_, s_.pump));
        consumers.emplace_back(sink->name());
      }
      pruners_.push_back(
          std::make_unique<relay::outbox_pruner>(io.get_executor(), source, std::move(consumers), metrics_, s_.prune));
    }
    ctx_ = std::make_unique<relay::route_context>(relay::route_context{
        {{[this] { return !stopping(); }, [this] { return metrics_.render(); }}, s_.token}, pumps_});
  }

  void spawn(std::function<asio::awaitable<void>()> loop) {
    asio::co_spawn(io_, std::move(loop), [this](std::exception_ptr e) {
      if (e) log::exit_on_failure(e);
      if (++finished_ == tasks()) all_stopped_.cancel();
    });
  }
  std::size_t tasks() const { return feeds_.size() + pumps_.size() + pruners_.size(); }

  asio::awaitable<void> async_start() override {
    for (auto& f : feeds_) spawn([f = f.get()]() -> asio::awaitable<void> { co_await f->async_run(); });
    for (auto& p : pumps_) spawn([p = p.get()]() -> asio::awaitable<void> { co_await p->async_run(); });
    for (auto& p : pruners_) spawn([p = p.get()]() -> asio::awaitable<void> { co_await p->async_run(); });
    server_ = std::make_unique<http::server>(io_, s_.listen, relay::make_handler(*ctx_), relay::body_limits());
    server_->start();
    log::info("serving", {{"address", s_.listen.address},
                          {"port", server_->port()},
                          {"sources", s_.sources.size()},
                          {"sinks", sinks_.size()},
                          {"consumers", pumps_.size()}});
    co_return;
  }

  asio::awaitable<void> async_stop() override {
    log::info("shutting down: finishing the batches in delivery");
    if (server_) co_await server_->async_shutdown(std::chrono::seconds(2));
    for (auto& p : pumps_) p->stop();  // each finishes its batch, saves its cursor and ends
    for (auto& f : feeds_) f->stop();
    for (auto& p : pruners_) p->stop();
    if (finished_ < tasks()) {
      all_stopped_.expires_after(std::chrono::seconds(10));
      co_await all_stopped_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    log::info("stopped");
  }

  asio::io_context& io_;
  settings s_;
  metrics::registry metrics_;
  redis::client redis_;
  std::vector<std::unique_ptr<relay::sink>> sinks_;
  std::vector<std::unique_ptr<relay::source_feed>> feeds_;  // one per source, read for all its consumers
  std::vector<std::unique_ptr<relay::pump>> pumps_;
  std::vector<std::unique_ptr<relay::outbox_pruner>> pruners_;  // one per source
  std::unique_ptr<relay::route_context> ctx_;
  std::unique_ptr<http::server> server_;
  std::size_t finished_ = 0;
  asio::steady_timer all_stopped_;  // cancelled when the last feed and pump have ended
};

}  // namespace

int main(int argc, char** argv) {
  return service::run("relay", "TALLY_RELAY", argc, argv,
                      [](asio::io_context& io, const config::config& cfg) -> std::unique_ptr<service::app> {
                        return std::make_unique<app>(io, read_settings(cfg));
                      });
}
