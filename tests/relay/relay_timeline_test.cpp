// The relay against a real replicated cluster (tests/support/ha_cluster.hpp)
// and a real Redis: after its source's failover a consumer finds the
// source on a new timeline, its sink forgets the source's projections
// (which may hold events the new primary never got) and is rebuilt from
// the new primary, and delivery goes on from the cursor the new primary
// has. A reconnection on the same timeline forgets nothing. The old
// primary comes back as a standby of the new one.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/metrics/metrics.hpp"
#include "common/migrate/migrate.hpp"
#include "common/projection/keys.hpp"
#include "common/redis/client.hpp"
#include "relay/service/feed.hpp"
#include "relay/service/pump.hpp"
#include "relay/sink/projection_sink.hpp"
#include "tests/relay/pg_session.hpp"
#include "tests/support/ha_cluster.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/redis_process.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::eventually;

// One source's projection consumer, run on a thread of its own while the
// test waits on the cluster.
class projection_consumer {
 public:
  projection_consumer(const std::string& conninfo, std::uint16_t redis_port)
      : redis_(io_.get_executor(), redis_options(redis_port)),
        sink_(redis_, 0ms),
        feed_(io_.get_executor(), {"s0", source_kind::shard, conninfo}, registry_, feed_options{}),
        pump_(io_.get_executor(), feed_, sink_, registry_, options()) {
    auto done = [this](std::exception_ptr e) {
      if (e) failed_ = true;
      if (--running_ == 0) io_.stop();
    };
    asio::co_spawn(io_, feed_.async_run(), done);
    asio::co_spawn(io_, pump_.async_run(), done);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~projection_consumer() { stop(); }
  // Stops the consumer; returns its metrics.
  std::string stop() {
    if (thread_.joinable()) {
      asio::post(io_, [this] {
        pump_.stop();
        feed_.stop();
      });
      thread_.join();
    }
    return registry_.render();
  }
  bool failed() const { return failed_; }

 private:
  static redis::client_options redis_options(std::uint16_t port) {
    redis::client_options o;
    o.port = port;
    return o;
  }
  static pump_options options() {
    pump_options o;
    o.standby_poll = 100ms;
    o.retry_max = 1s;
    return o;
  }
  asio::io_context io_;
  metrics::registry registry_;
  redis::client redis_;
  projection_sink sink_;
  source_feed feed_;
  pump pump_;
  std::atomic<int> running_{2};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

void open_account(const std::string& db, const std::string& id) {
  test::exec_sql(db, "INSERT INTO account (tenant, account_id, balance, held, status, version) VALUES ('t', '" + id +
                         "', 0, 0, 'active', 1)");
  test::exec_sql(db, relay_test::event_sql(id));
}

TEST(RelayTimeline, AfterAFailoverTheSinkForgetsTheSourceAndIsRebuiltFromTheNewPrimary) {
  const auto db = test::ha_create_database("relay_timeline");
  const auto database = db.substr(db.rfind('/') + 1, db.find('?') - db.rfind('/') - 1);
  migrate::apply(db, migrate::load(test::source_dir() + "/migrations/shard"));
  open_account(db, "a");
  test::redis_process redis;
  redis.start();
  projection_consumer relay(db, redis.port());
  const auto a = projection::account_key("t", "a");
  ASSERT_TRUE(eventually([&] { return redis.field_is(a, "v", "1"); }, 30s)) << "never delivered";
  const auto old_primary = test::ha_primary(database);
  const auto first = std::to_string(test::ha_timeline(old_primary));
  const std::string cursor_on = "SELECT count(*) FROM relay_cursor WHERE consumer = 'projection' AND timeline = ";
  ASSERT_TRUE(eventually([&] { return test::query_int(db, cursor_on + first) == 1; }))
      << "the cursor was not saved with its timeline";

  // What an event delivered from the old primary and lost with it leaves:
  // a projection of a higher version than the ledger will ever write. The
  // object keeps its source (an update of its three fields adds none).
  ASSERT_TRUE(redis.replies("HSET " + a + " v 9 doc lost src s0", ":0\r\n"));

  // The consumer's connections cut on the same server: it comes back,
  // delivers, and forgets nothing.
  test::exec_sql(old_primary,
                 "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                 " WHERE datname = current_database() AND pid <> pg_backend_pid()");
  open_account(db, "b");
  ASSERT_TRUE(eventually([&] { return redis.exists(projection::account_key("t", "b")); }, 30s));
  EXPECT_TRUE(redis.field_is(a, "v", "9")) << "forgotten without a failover";

  ASSERT_TRUE(test::ha_switchover(120s)) << "the formation did not switch over";
  const auto new_primary = test::ha_primary(database);
  const auto second = std::to_string(test::ha_timeline(new_primary));
  ASSERT_NE(first, second);
  EXPECT_NE(old_primary, new_primary);

  // The sink forgot the source and was rebuilt: the ledger's version.
  ASSERT_TRUE(eventually([&] { return redis.field_is(a, "v", "1"); }, 60s)) << "the projection kept the lost event";
  EXPECT_TRUE(redis.exists(projection::source_marker("s0")));
  EXPECT_TRUE(redis.field_is(projection::account_key("t", "b"), "v", "1"));
  // Delivery goes on from the new primary, and the cursor has its timeline.
  open_account(db, "c");
  EXPECT_TRUE(eventually([&] { return redis.exists(projection::account_key("t", "c")); }, 30s));
  EXPECT_TRUE(eventually([&] { return test::query_int(db, cursor_on + second) == 1; }));

  // The old primary streams from the new one.
  EXPECT_TRUE(eventually(
      [&] {
        try {
          return test::query_int(old_primary, "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'") ==
                 1;
        } catch (const std::exception&) {
          return false;  // still restarting
        }
      },
      60s))
      << "the old primary did not rejoin";

  const auto metrics = relay.stop();
  EXPECT_FALSE(relay.failed());
  EXPECT_NE(metrics.find(R"(tally_relay_resyncs_total{sink="projection",source="s0"} 1)"), std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace tally::relay
