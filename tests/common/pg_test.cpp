// The asynchronous PostgreSQL client against a real server.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/pg/listener.hpp"
#include "common/pg/pool.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::pg {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

template <typename F>
void run(F body) {
  tally::test::run_coroutine(std::move(body));
}

pool_options options(const std::string& conninfo, std::size_t size, std::chrono::milliseconds acquire = 3s) {
  pool_options o;
  o.conninfo = conninfo;
  o.max_size = size;
  o.acquire_timeout = acquire;
  return o;
}

// Whether `done` holds within `limit`, looking every few milliseconds.
template <typename F>
asio::awaitable<bool> eventually(asio::io_context& io, F done, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  asio::steady_timer pause(io);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) co_return false;
    pause.expires_after(5ms);
    co_await pause.async_wait(asio::use_awaitable);
  }
  co_return true;
}

class PgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { db_ = new std::string(test::create_database("pg_it")); }
  static std::string* db_;
};
std::string* PgTest::db_ = nullptr;

// Sessions run without JIT, and keep the options their conninfo gives.
TEST_F(PgTest, SessionsRunWithoutJitAndKeepTheirOwnOptions) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    for (const std::string& extra : {std::string(), std::string(" options='-c work_mem=5MB'")}) {
      connection c(io.get_executor());
      auto err = co_await c.async_connect(*db_ + extra, 3s);
      EXPECT_FALSE(err) << err.message;
      std::vector<statement> st{{"SHOW jit", {}}, {"SHOW work_mem", {}}};
      std::vector<result> rs;
      err = co_await c.async_pipeline(st, rs, 3s);
      EXPECT_FALSE(err) << err.message;
      if (rs.size() != 2) continue;
      EXPECT_EQ(rs[0].text(0, 0), "off");
      if (!extra.empty()) {
        EXPECT_EQ(rs[1].text(0, 0), "5MB");
      }
    }
    connection bad(io.get_executor());
    auto err = co_await bad.async_connect("host=127.0.0.1 nonsense=1", 3s);
    EXPECT_TRUE(err);
  });
}

TEST_F(PgTest, PipelineRunsStatementsInOrderWithParameters) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    auto err = co_await c.async_connect(*db_, 3s);
    EXPECT_FALSE(err) << err.message;
    std::vector<statement> st{{"SELECT $1::int + 1", {"41"}},
                              {"SELECT $1::text || $2::text", {"ab", "cd"}},
                              {"SELECT $1::text IS NULL", {param{}}},
                              {"SELECT unnest($1::text[])", {array_literal(std::vector<std::string>{"a\"b", "c\\d"})}}};
    std::vector<result> rs;
    err = co_await c.async_pipeline(st, rs, 3s);
    EXPECT_FALSE(err) << err.message;
    EXPECT_EQ(rs.size(), 4u);
    EXPECT_EQ(rs[0].int64(0, 0), 42);
    EXPECT_EQ(rs[1].text(0, 0), "abcd");
    EXPECT_TRUE(rs[2].boolean(0, 0));
    EXPECT_EQ(rs[3].rows(), 2);
    EXPECT_EQ(rs[3].text(0, 0), "a\"b");
    EXPECT_EQ(rs[3].text(1, 0), "c\\d");
    // The same statements again reuse their prepared forms.
    err = co_await c.async_pipeline(st, rs, 3s);
    EXPECT_FALSE(err) << err.message;
    EXPECT_EQ(rs[0].int64(0, 0), 42);
  });
}

TEST_F(PgTest, SqlStateIsMappedAndTheConnectionStaysUsable) {
  test::exec_sql(*db_, "CREATE TABLE IF NOT EXISTS uniq (k int PRIMARY KEY)");
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    co_await c.async_connect(*db_, 3s);
    std::vector<statement> st{
        {"BEGIN", {}}, {"INSERT INTO uniq VALUES (1)", {}}, {"INSERT INTO uniq VALUES (1)", {}}, {"SELECT 1", {}}};
    std::vector<result> rs;
    auto err = co_await c.async_pipeline(st, rs, 3s);
    EXPECT_EQ(err.code, errc::unique_violation);
    EXPECT_EQ(err.sqlstate, "23505");
    EXPECT_TRUE(is_transient(err.code));
    result r;
    err = co_await c.async_exec("ROLLBACK", r, 3s);
    EXPECT_FALSE(err) << err.message;
    err = co_await c.async_exec("SELECT count(*) FROM uniq", r, 3s);
    EXPECT_FALSE(err) << err.message;
    EXPECT_EQ(r.int64(0, 0), 0) << "the aborted transaction left nothing";
  });
}

// The server's warning that a commit went without its synchronous
// standby's confirmation (raised here as the server raises it, with the
// same severity and message; tests/ha provoke the real one) turns a
// success into outcome-unknown; any other warning leaves it a success.
TEST_F(PgTest, ACommitNotConfirmedByAStandbyIsOutcomeUnknown) {
  test::exec_sql(*db_, "CREATE TABLE IF NOT EXISTS unconfirmed (k int PRIMARY KEY)");
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    co_await c.async_connect(*db_, 3s);
    result r;
    auto err = co_await c.async_exec("DO $$ BEGIN RAISE WARNING 'some other warning'; END $$", r, 3s);
    EXPECT_FALSE(err) << err.message;
    std::vector<statement> st{
        {"INSERT INTO unconfirmed VALUES (1)", {}},
        {"DO $$ BEGIN RAISE WARNING 'canceling wait for synchronous replication due to user request'"
         " USING DETAIL = 'The transaction has already committed locally, but might not have been replicated to"
         " the standby.'; END $$",
         {}}};
    std::vector<result> rs;
    err = co_await c.async_pipeline(st, rs, 3s);
    EXPECT_EQ(err.code, errc::commit_not_replicated);
    EXPECT_TRUE(is_outcome_unknown(err.code));
    EXPECT_FALSE(is_transient(err.code));
    EXPECT_FALSE(c.is_open());
  });
  EXPECT_EQ(test::query_int(*db_, "SELECT count(*) FROM unconfirmed"), 1) << "it did commit, here";
}

TEST(PgErrors, OnlyTheSynchronousReplicationWarningsMeanAnUnreplicatedCommit) {
  EXPECT_TRUE(
      is_unreplicated_commit_warning("WARNING", "canceling wait for synchronous replication due to user request"));
  EXPECT_TRUE(is_unreplicated_commit_warning(
      "WARNING",
      "canceling the wait for synchronous replication and terminating connection due to administrator command"));
  EXPECT_FALSE(is_unreplicated_commit_warning("NOTICE", "canceling wait for synchronous replication"));
  EXPECT_FALSE(is_unreplicated_commit_warning("WARNING", "there is no transaction in progress"));
}

TEST_F(PgTest, TimeoutClosesTheConnectionAndReportsUnknownOutcome) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    co_await c.async_connect(*db_, 3s);
    result r;
    auto started = std::chrono::steady_clock::now();
    auto err = co_await c.async_exec("SELECT pg_sleep(5)", r, 200ms);
    EXPECT_EQ(err.code, errc::timeout);
    EXPECT_TRUE(is_outcome_unknown(err.code));
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
    EXPECT_FALSE(c.is_open());
  });
}

TEST_F(PgTest, ConnectToAClosedPortFails) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    connection c(io.get_executor());
    auto err = co_await c.async_connect("host=127.0.0.1 port=1 user=postgres dbname=postgres", 2s);
    EXPECT_EQ(err.code, errc::connection_failed);
  });
}

// The session's process id, on a connection from the pool (0 on failure).
asio::awaitable<std::int64_t> backend_pid(pool& p, lease& l) {
  if (co_await p.async_acquire(l)) co_return 0;
  result r;
  if (co_await l->async_exec("SELECT pg_backend_pid()", r, 3s)) co_return 0;
  co_return r.int64(0, 0);
}

// The pool's next connection is a new session, outside any transaction.
asio::awaitable<void> expect_new_session(pool& p, std::int64_t old_pid) {
  lease l;
  const auto pid = co_await backend_pid(p, l);
  EXPECT_NE(pid, 0);
  EXPECT_NE(pid, old_pid);
  EXPECT_FALSE(l->in_transaction());
}

// Ends a session and waits until its process is gone, as a restart does.
void terminate_backend(const std::string& db, std::int64_t pid) {
  test::exec_sql(db, "SELECT pg_terminate_backend(" + std::to_string(pid) + ", 5000)");
}

// A pool of two on `db` leases its first session to `held` (which may end
// it, or leave a transaction open) and, once it is given back, shows itself
// to `given_back`: the pool's next session must be a new one.
template <typename Held, typename GivenBack>
void expect_new_session_after(const std::string& db, Held held, GivenBack given_back) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    pool p(io.get_executor(), options(db, 2));
    std::int64_t first_pid = 0;
    {
      lease l;
      first_pid = co_await backend_pid(p, l);
      EXPECT_NE(first_pid, 0);
      if (first_pid == 0) co_return;
      co_await held(l, first_pid);
    }
    given_back(p, first_pid);
    co_await expect_new_session(p, first_pid);
  });
}

TEST_F(PgTest, PoolHandsOutAFreshConnectionWhenTheServerEndedAnIdleOne) {
  expect_new_session_after(
      *db_, [](lease&, std::int64_t) -> asio::awaitable<void> { co_return; },
      [&](pool& p, std::int64_t first_pid) {
        EXPECT_EQ(p.idle(), 1u);
        // The first query after the server ended the idle session succeeds.
        terminate_backend(*db_, first_pid);
      });
}

TEST_F(PgTest, PoolReplacesAConnectionTheServerKilledWhileInUse) {
  expect_new_session_after(
      *db_,
      [&](lease& l, std::int64_t first_pid) -> asio::awaitable<void> {
        terminate_backend(*db_, first_pid);
        result r;
        auto err = co_await l->async_exec("SELECT pg_backend_pid()", r, 3s);
        // libpq reports the terminated session as lost (or as 57P01 when the
        // server's notice arrives first); either way the outcome is unknown.
        EXPECT_TRUE(is_outcome_unknown(err.code)) << err.message;
      },
      [](pool&, std::int64_t) {});
}

TEST_F(PgTest, PoolClosesAConnectionGivenBackInsideATransaction) {
  expect_new_session_after(
      *db_,
      [](lease& l, std::int64_t) -> asio::awaitable<void> {
        result r;
        auto err = co_await l->async_exec("BEGIN", r, 3s);
        EXPECT_FALSE(err) << err.message;
        EXPECT_TRUE(l->in_transaction());
      },
      [](pool& p, std::int64_t) { EXPECT_EQ(p.idle(), 0u); });
}

TEST_F(PgTest, PoolWaitsForAFreeConnectionThenTimesOut) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    pool p(io.get_executor(), options(*db_, 1, 300ms));
    lease held;
    co_await p.async_acquire(held);
    lease second;
    auto err = co_await p.async_acquire(second);
    EXPECT_EQ(err.code, errc::pool_exhausted);
  });
}

TEST_F(PgTest, PoolRunsTheSessionSqlOnEveryNewConnection) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    auto o = options(*db_, 1);
    o.session_sql = "SET application_name = 'tally_pool_test'";
    pool p(io.get_executor(), o);
    lease l;
    co_await p.async_acquire(l);
    result r;
    auto err = co_await l->async_exec("SHOW application_name", r, 3s);
    EXPECT_FALSE(err) << err.message;
    EXPECT_EQ(r.text(0, 0), "tally_pool_test");
  });
}

TEST_F(PgTest, ListenerHandsOverNotificationsAndListensAgainAfterALoss) {
  run([&](asio::io_context& io) -> asio::awaitable<void> {
    std::vector<std::string> got;
    int listening = 0;
    listener_handlers handlers{[&](std::string_view channel, std::string_view payload) {
                                 got.push_back(std::string(channel) + "=" + std::string(payload));
                               },
                               [&] { ++listening; }};
    std::vector<std::string> channels{"tally_test_a", "tally test b"};
    listener l(io.get_executor(), *db_, channels, handlers, 50ms);
    bool ended = false;
    auto listen = [&]() -> asio::awaitable<void> { co_await l.async_run(); };
    asio::co_spawn(io, listen, [&](std::exception_ptr) { ended = true; });
    EXPECT_TRUE(co_await eventually(io, [&] { return listening == 1; }));
    test::exec_sql(*db_, "SELECT pg_notify('tally_test_a', 'one'), pg_notify('tally test b', 'two')");
    test::exec_sql(*db_, "NOTIFY other_channel, 'not heard'");
    EXPECT_TRUE(co_await eventually(io, [&] { return got.size() == 2; }));
    EXPECT_EQ(got, (std::vector<std::string>{"tally_test_a=one", "tally test b=two"}));

    // The server ends the listening session: the listener listens again and says so.
    test::exec_sql(*db_,
                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   " WHERE datname = current_database() AND query LIKE 'LISTEN%'");
    EXPECT_TRUE(co_await eventually(io, [&] { return listening == 2; })) << listening;
    test::exec_sql(*db_, "SELECT pg_notify('tally_test_a', 'three')");
    EXPECT_TRUE(co_await eventually(io, [&] { return got.size() == 3; }));
    EXPECT_EQ(got.back(), "tally_test_a=three");

    l.stop();
    EXPECT_TRUE(co_await eventually(io, [&] { return ended; }));
  });
}

}  // namespace
}  // namespace tally::pg
