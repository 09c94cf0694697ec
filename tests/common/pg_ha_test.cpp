// The PostgreSQL client against a real replicated cluster (a primary and
// two synchronous-quorum standbys under pg_auto_failover, started by
// scripts/test through scripts/lib/ha.sh; TALLY_TEST_HA_CONNINFO is its
// multi-host URI).
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/pg/connection.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::pg {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

std::string ha_conninfo() {
  const char* c = std::getenv("TALLY_TEST_HA_CONNINFO");
  return c ? c : "";
}

// Each node's own conninfo, from the URI's host list.
std::vector<std::string> nodes(const std::string& uri) {
  std::smatch m;
  static const std::regex hosts(R"(^postgres(?:ql)?://([^@/]*@)?([^/?]+))");
  std::vector<std::string> out;
  if (!std::regex_search(uri, m, hosts)) return out;
  const std::string list = m[2];
  static const std::regex host_port(R"(([^,:]+):(\d+))");
  for (std::sregex_iterator it(list.begin(), list.end(), host_port), end; it != end; ++it)
    out.push_back("host=" + (*it)[1].str() + " port=" + (*it)[2].str() + " user=postgres dbname=postgres");
  return out;
}

// While both standbys replay nothing, a commit with synchronous_commit =
// remote_apply waits for them; cancelled, the server returns success with
// its warning. The client must call that outcome-unknown (and the row is
// indeed committed on the primary, not yet on any standby).
TEST(PgHa, ACommitWhoseStandbyWaitIsCancelledIsOutcomeUnknown) {
  const auto uri = ha_conninfo();
  ASSERT_FALSE(uri.empty()) << "TALLY_TEST_HA_CONNINFO: scripts/test starts the cluster (scripts/lib/ha.sh)";
  std::vector<std::string> standbys;
  std::string primary;
  for (const auto& n : nodes(uri)) {
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

}  // namespace
}  // namespace tally::pg
