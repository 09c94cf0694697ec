// The PostgreSQL client against a real replicated cluster (a primary and
// two synchronous-quorum standbys under pg_auto_failover, started by
// scripts/test through scripts/lib/ha.sh; tests/support/ha_cluster.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/pg/connection.hpp"
#include "tests/support/ha_cluster.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::pg {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// While both standbys replay nothing, a commit with synchronous_commit =
// remote_apply waits for them; cancelled, the server returns success with
// its warning. The client must call that outcome-unknown (and the row is
// indeed committed on the primary, not yet on any standby).
TEST(PgHa, ACommitWhoseStandbyWaitIsCancelledIsOutcomeUnknown) {
  const auto uri = test::ha_uri();
  std::vector<std::string> standbys;
  std::string primary;
  for (const auto& n : test::ha_nodes()) {
    if (test::query_int(n, "SELECT pg_is_in_recovery()::int") == 1)
      standbys.push_back(n);
    else
      primary = n;
  }
  ASSERT_EQ(standbys.size(), 2u) << uri;
  ASSERT_FALSE(primary.empty());
  test::exec_sql(primary, "CREATE TABLE IF NOT EXISTS ha_unconfirmed (k bigint PRIMARY KEY)");
  const auto key =
      std::to_string(test::query_int(primary, "SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint"));
  for (const auto& s : standbys) test::exec_sql(s, "SELECT pg_wal_replay_pause()");

  error err;
  bool cancelled = false;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    err = co_await c.async_connect(uri, 5s);
    if (err) co_return;
    result r;
    err = co_await c.async_exec("SELECT pg_backend_pid()", r, 5s);
    if (err) co_return;
    const auto pid = std::to_string(r.int64(0, 0));
    // The canceller: once the insert waits for the standbys, cancel it.
    asio::co_spawn(
        io,
        [&, pid]() -> asio::awaitable<void> {
          asio::steady_timer pause(io);
          for (int i = 0; i < 500 && !cancelled; ++i) {
            if (test::query_int(
                    primary, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND pid = " + pid) ==
                1)
              cancelled = test::query_int(primary, "SELECT pg_cancel_backend(" + pid + ")::int") == 1;
            pause.expires_after(10ms);
            co_await pause.async_wait(asio::use_awaitable);
          }
        },
        asio::detached);
    std::vector<statement> st{{"SET synchronous_commit = remote_apply", {}},
                              {"INSERT INTO ha_unconfirmed VALUES ($1)", {key}}};
    std::vector<result> rs;
    err = co_await c.async_pipeline(st, rs, 10s);
  });
  for (const auto& s : standbys) test::exec_sql(s, "SELECT pg_wal_replay_resume()");

  EXPECT_TRUE(cancelled) << "the insert never waited for a standby";
  EXPECT_EQ(err.code, errc::commit_not_replicated) << err.message;
  EXPECT_TRUE(is_outcome_unknown(err.code));
  EXPECT_EQ(test::query_int(primary, "SELECT count(*) FROM ha_unconfirmed WHERE k = " + key), 1)
      << "committed on the primary all the same";
}

// A write that reaches a standby (a node demoted under an open connection,
// or a conninfo that allows any node) is refused, nothing is written, and
// the connection goes; a transaction retried on a new connection through
// the cluster's URI lands on the primary.
TEST(PgHa, AWriteOnAStandbyIsRefusedAndRetriedOnThePrimary) {
  std::string standby;
  for (const auto& n : test::ha_nodes())
    if (test::query_int(n, "SELECT pg_is_in_recovery()::int") == 1) standby = n;
  ASSERT_FALSE(standby.empty());
  const auto primary = test::ha_primary();
  test::exec_sql(primary, "CREATE TABLE IF NOT EXISTS ha_retried (k bigint PRIMARY KEY)");
  ASSERT_TRUE(test::eventually([&] {
    return test::query_int(standby, "SELECT count(*) FROM pg_tables WHERE tablename = 'ha_retried'") == 1;
  })) << "the standby never replayed the table";
  const auto key =
      std::to_string(test::query_int(primary, "SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint"));
  const std::string insert = "INSERT INTO ha_retried VALUES ($1)";
  error on_standby, on_retry;
  bool closed = false;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    if (auto err = co_await c.async_connect(standby, 5s)) {
      on_standby = err;
      co_return;
    }
    result r;
    std::vector<param> params{key};
    on_standby = co_await c.async_exec(insert, std::move(params), r, 5s);
    closed = !c.is_open();
    if (!is_transient(on_standby.code)) co_return;
    connection again(io.get_executor());
    on_retry = co_await again.async_connect(test::ha_uri(), 5s);
    if (on_retry) co_return;
    std::vector<param> retried{key};
    on_retry = co_await again.async_exec(insert, std::move(retried), r, 5s);
  });
  EXPECT_EQ(on_standby.code, errc::read_only) << on_standby.message;
  EXPECT_TRUE(closed) << "the connection to the standby stayed open";
  EXPECT_FALSE(on_retry) << on_retry.message;
  EXPECT_EQ(test::query_int(primary, "SELECT count(*) FROM ha_retried WHERE k = " + key), 1);
}

}  // namespace
}  // namespace tally::pg
