// account_shard: owns one PostgreSQL database (accounts, operations, ledger,
// holds, outbox) and answers the orchestrator over internal HTTP.
//   account_shard [--config=FILE] [--key=value ...]   serve (standby until it holds the writer lock)
//   account_shard migrate [...]                        apply migrations and exit
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "account_shard/service/commit_queue.hpp"
#include "account_shard/service/audit_job.hpp"
#include "account_shard/service/expiry_job.hpp"
#include "account_shard/service/leadership.hpp"
#include "account_shard/service/routes.hpp"
#include "account_shard/store/batch.hpp"
#include "account_shard/store/queries.hpp"
#include "common/config/config.hpp"
#include "common/http/server.hpp"
#include "common/log/log.hpp"
#include "common/metrics/metrics.hpp"
#include "common/retry/backoff.hpp"
#include "common/service/runner.hpp"
#include "common/service/settings.hpp"

namespace asio = boost::asio;
using namespace tally;

namespace {

// Exit code when this process lost the right to write: a supervisor
// restarts it, and it comes back as a standby.
constexpr int exit_lost_writer = 75;

struct settings {
  std::string conninfo;
  std::string token;
  std::string migrations_dir;
  http::server_options listen;
  shard::commit_options commit;
  std::size_t read_pool = 4;
  std::string holder;
  shard::expiry_options expiry;
  shard::audit_options audit;
  bool clock_control = false;
};

settings read_settings(const config::config& cfg) {
  settings s;
  s.conninfo = service::required_string(cfg, "database.conninfo");
  s.token = cfg.get_secret("internal_token", 16);
  s.migrations_dir = cfg.get_string("migrations.dir", TALLY_MIGRATIONS_DIR "/shard");
  s.listen = service::read_listen(cfg, "listen", 7101);
  // A full batch of 1000 commands is about 150 KB.
  s.listen.body_limit = static_cast<std::size_t>(cfg.get_int("listen.body_limit", 1024 * 1024));
  auto mode = cfg.get_string("commit_mode", "group");
  if (mode == "group") {
    s.commit.max_batch = static_cast<std::size_t>(cfg.get_int("commit.max_batch", 1000));
    // Two batches in flight: one is committing (waiting for its WAL flush)
    // while the next reads and decides.
    s.commit.workers = static_cast<std::size_t>(cfg.get_int("commit.workers", 2));
  } else if (mode == "per-command") {
    s.commit.max_batch = 1;
    s.commit.workers = static_cast<std::size_t>(cfg.get_int("commit.workers", 16));
  } else {
    throw std::runtime_error("commit_mode must be group or per-command");
  }
  s.commit.statement_timeout = std::chrono::milliseconds(cfg.get_int("database.statement_timeout_ms", 5000));
  s.commit.require_synchronous_standby = cfg.get_bool("database.require_synchronous_standby", false);
  // Hot-account admission: the longest a command may wait behind its own account.
  const auto max_wait_ms = cfg.get_int("admission.max_wait_ms", 20);
  if (max_wait_ms < 0 || max_wait_ms > 60'000) throw std::runtime_error("admission.max_wait_ms must be 0 to 60000");
  s.commit.admission.max_wait = std::chrono::milliseconds(max_wait_ms);
  s.read_pool = static_cast<std::size_t>(cfg.get_int("database.read_pool", 4));
  s.expiry.interval = std::chrono::milliseconds(cfg.get_int("expiry.interval_ms", 1000));
  s.expiry.batch = static_cast<int>(cfg.get_int("expiry.batch", 200));
  if (s.expiry.interval.count() < 1 || s.expiry.batch < 1 || s.expiry.batch > 1000)
    throw std::runtime_error("expiry.interval_ms must be >= 1 and expiry.batch 1 to 1000");
  s.audit.page_accounts = static_cast<int>(cfg.get_int("audit.page_accounts", 1000));
  s.audit.pause = std::chrono::milliseconds(cfg.get_int("audit.pause_ms", 20));
  s.audit.idle = std::chrono::milliseconds(cfg.get_int("audit.idle_ms", 5000));
  s.audit.share_percent = static_cast<int>(cfg.get_int("audit.share_percent", 20));
  if (s.audit.page_accounts < 1 || s.audit.page_accounts > 100'000 || s.audit.pause.count() < 0 ||
      s.audit.idle.count() < 1 || s.audit.share_percent < 1 || s.audit.share_percent > 100)
    throw std::runtime_error(
        "audit.page_accounts must be 1 to 100000, audit.pause_ms >= 0, audit.idle_ms >= 1, audit.share_percent 1 to "
        "100");
  s.commit.refund_grace_ms = cfg.get_int("refund.expired_lot_grace_ms", 7LL * 24 * 3600 * 1000);
  if (s.commit.refund_grace_ms < 0) throw std::runtime_error("refund.expired_lot_grace_ms must be >= 0");
  s.clock_control = cfg.get_bool("testing.clock_control", false);
  s.holder = cfg.get_string(
      "instance", service::host_name() + ":" + std::to_string(getpid()) + ":" + std::to_string(s.listen.port));
  return s;
}

pg::pool_options pool_options(const std::string& conninfo, std::size_t size, std::string session_sql) {
  pg::pool_options o;
  o.conninfo = conninfo;
  o.max_size = size;
  o.session_sql = std::move(session_sql);
  return o;
}

struct app : service::app {
  app(asio::io_context& io, settings s)
      : io_(io),
        s_(std::move(s)),
        lead_(io.get_executor(), s_.conninfo, s_.holder),
        writers_(io.get_executor(),
                 pool_options(s_.conninfo, s_.commit.workers + 1, std::string(shard::shard_writer_session_sql))),
        readers_(io.get_executor(), pool_options(s_.conninfo, s_.read_pool, "")),
        commits_(io.get_executor(), writers_, s_.commit, clock_, metrics_, [] { std::_Exit(exit_lost_writer); }),
        reads_(readers_, writers_, s_.commit.statement_timeout),
        expiry_(io.get_executor(), commits_, reads_, clock_, s_.expiry, metrics_),
        audits_(io.get_executor(), reads_, s_.audit, metrics_, [this] { return epoch_; }),
        leader_gauge_(metrics_.add_gauge("tally_shard_is_writer", "1 while this instance is the shard's writer")),
        ctx_{{{[this] { return epoch_ > 0 && !stopping(); }, [this] { return metrics_.render(); }}, s_.token},
             commits_,
             reads_,
             [this] { return epoch_; },
             clock_,
             s_.clock_control,
             [this] { audits_.poke(); }} {}

  asio::awaitable<void> async_start() override {
    epoch_ = co_await lead_.async_acquire(std::chrono::milliseconds(200));
    leader_gauge_.set(1);
    commits_.start(epoch_);
    expiry_.start();
    audits_.start();
    // The port is bound only by the writer, so clients keep one address per
    // shard and a standby takes it over when the writer dies; the old
    // writer's socket may linger for a moment after it died.
    constexpr retry::backoff rebind{std::chrono::milliseconds(100), std::chrono::milliseconds(100), 50};
    for (std::size_t retries = 0;; ++retries) {
      boost::system::error_code bind_error;
      try {
        server_ = std::make_unique<http::server>(io_, s_.listen, shard::make_handler(ctx_), shard::body_limits());
        server_->start();
        break;
      } catch (const boost::system::system_error& e) {
        bind_error = e.code();
        server_.reset();
      }
      if (retry::spent(rebind, retries)) throw boost::system::system_error(bind_error, "bind");
      asio::steady_timer t(io_, retry::delay(rebind, retries));
      co_await t.async_wait(asio::use_awaitable);
    }
    log::info("serving", {{"address", s_.listen.address},
                          {"port", server_->port()},
                          {"epoch", epoch_},
                          {"max_batch", s_.commit.max_batch},
                          {"admission_max_wait_ms",
                           std::chrono::duration_cast<std::chrono::milliseconds>(s_.commit.admission.max_wait).count()},
                          {"workers", s_.commit.workers}});
    co_await lead_.async_watch(std::chrono::milliseconds(500), [] {
      log::error("exiting: the writer lock is no longer held");
      std::_Exit(exit_lost_writer);
    });
  }

  asio::awaitable<void> async_stop() override {
    if (!server_) std::_Exit(0);  // a standby has nothing in flight
    log::info("shutting down: finishing in-flight requests");
    lead_.stop();
    expiry_.stop();
    audits_.stop();
    if (server_) co_await server_->async_shutdown(std::chrono::seconds(10));
    co_await commits_.async_drain();
    co_await expiry_.async_stopped();
    co_await audits_.async_stopped();
    log::info("stopped");
  }

  asio::io_context& io_;
  settings s_;
  metrics::registry metrics_;
  shard::leadership lead_;
  pg::pool writers_;
  pg::pool readers_;
  shard::shard_clock clock_;
  shard::commit_queue commits_;
  shard::queries reads_;
  shard::expiry_job expiry_;
  shard::audit_job audits_;
  metrics::gauge& leader_gauge_;
  shard::route_context ctx_;
  std::unique_ptr<http::server> server_;
  std::int64_t epoch_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  return service::run("account_shard", "TALLY_SHARD", argc, argv,
                      [&](asio::io_context& io, const config::config& cfg) -> std::unique_ptr<service::app> {
                        settings s = read_settings(cfg);
                        if (service::apply_migrations(argc, argv, s.conninfo, s.migrations_dir)) return nullptr;
                        return std::make_unique<app>(io, std::move(s));
                      });
}
