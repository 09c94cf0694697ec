// The relay's outbox reader on a real PostgreSQL: commit-safe order across
// transactions that commit out of order, and no stall from transactions in
// other databases.
#include <gtest/gtest.h>

#include <string>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/migrate/migrate.hpp"
#include "relay/outbox/reader.hpp"
#include "tests/relay/pg_session.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

using relay_test::event_sql;
using relay_test::session;

class RelayOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = test::create_database("relay_order");
    migrate::apply(db_, migrate::load(test::source_dir() + "/migrations/shard"));
  }
  // The account ids the reader returns after the start, in order.
  std::vector<std::string> read() {
    std::vector<std::string> ids;
    test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
      outbox_reader reader(io.get_executor(), {"s0", source_kind::shard, db_}, "projection", 5s, 100ms);
      bool holder = false;
      auto err = co_await reader.async_take_lock(holder);
      EXPECT_FALSE(err) << err.message;
      std::vector<outbox_event> events;
      const cursor start;  // a named local: GCC 12 mishandles temporaries in a co_await operand
      err = co_await reader.async_next(start, 100, events);
      EXPECT_FALSE(err) << err.message;
      for (const auto& e : events) ids.push_back(e.object_id);
    });
    return ids;
  }
  std::string db_;
};

TEST_F(RelayOrder, ALaterCommitWaitsForAnOlderTransactionStillRunning) {
  session older(db_), younger(db_);
  older.exec("BEGIN");
  older.exec(event_sql("first"));  // takes its transaction id now, commits last
  younger.exec(event_sql("second"));
  EXPECT_TRUE(read().empty());  // "second" alone would let a cursor skip "first"
  older.exec("COMMIT");
  EXPECT_EQ(read(), (std::vector<std::string>{"first", "second"}));
}

TEST_F(RelayOrder, RolledBackTransactionsHoldNothingBack) {
  session aborted(db_), writer(db_);
  aborted.exec("BEGIN");
  aborted.exec(event_sql("never"));
  writer.exec(event_sql("kept"));
  aborted.exec("ROLLBACK");
  EXPECT_EQ(read(), std::vector<std::string>{"kept"});
}

TEST_F(RelayOrder, TransactionsInOtherDatabasesDoNotHoldDeliveryBack) {
  const auto other_db = test::create_database("relay_other");
  session other(other_db), writer(db_);
  other.exec("CREATE TABLE t (x int)");
  other.exec("BEGIN");
  other.exec("INSERT INTO t VALUES (1)");  // an id older than the write below, in another database
  writer.exec(event_sql("here"));
  EXPECT_EQ(read(), std::vector<std::string>{"here"});
  other.exec("ROLLBACK");
}

// Between scans one reader moves on by the server-wide snapshot's xmin: it
// still waits for an older transaction of its own database, and for one in
// another database too, until its next scan. Other tests share this server,
// and their transactions hold the xmin back for a moment too: what must
// come is polled for, and only what can never come before its time is
// checked at once.
TEST_F(RelayOrder, BetweenScansTheServerWideHorizonIsSafeAndMovesOn) {
  const auto other_db = test::create_database("relay_other");
  session older(db_), writer(db_), other(other_db);
  other.exec("CREATE TABLE t (x int)");
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    // One scan at the first read, none after.
    outbox_reader reader(io.get_executor(), {"s0", source_kind::shard, db_}, "projection", 5s, 1h);
    bool holder = false;
    auto err = co_await reader.async_take_lock(holder);
    EXPECT_FALSE(err) << err.message;
    cursor at;
    std::vector<outbox_event> events;
    auto next = [&]() -> asio::awaitable<std::vector<std::string>> {
      std::vector<std::string> ids;
      auto e = co_await reader.async_next(at, 100, events);
      EXPECT_FALSE(e) << e.message;
      for (const auto& ev : events) ids.push_back(ev.object_id);
      if (!events.empty()) at = cursor{events.back().tx_id, events.back().id};
      co_return ids;
    };
    // Reads until `count` events came, for up to 30 s.
    auto until = [&](std::size_t count) -> asio::awaitable<std::vector<std::string>> {
      std::vector<std::string> ids;
      asio::steady_timer pause(io);
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (ids.size() < count && std::chrono::steady_clock::now() < deadline) {
        auto got = co_await next();
        ids.insert(ids.end(), got.begin(), got.end());
        pause.expires_after(10ms);
        co_await pause.async_wait(asio::use_awaitable);
      }
      co_return ids;
    };
    auto seen = co_await next();  // the scan
    EXPECT_TRUE(seen.empty());

    writer.exec(event_sql("a"));
    seen = co_await until(1);
    EXPECT_EQ(seen, std::vector<std::string>{"a"});

    older.exec("BEGIN");
    older.exec(event_sql("b"));
    writer.exec(event_sql("c"));
    seen = co_await next();
    EXPECT_TRUE(seen.empty());  // the xmin lies at or below b's transaction
    older.exec("COMMIT");
    seen = co_await until(2);
    EXPECT_EQ(seen, (std::vector<std::string>{"b", "c"}));

    other.exec("BEGIN");
    other.exec("INSERT INTO t VALUES (1)");
    writer.exec(event_sql("d"));
    seen = co_await next();
    EXPECT_TRUE(seen.empty());  // held back by the other database until a scan
    reader.close();             // a new connection scans again
    err = co_await reader.async_take_lock(holder);
    EXPECT_FALSE(err) << err.message;
    seen = co_await next();
    EXPECT_EQ(seen, std::vector<std::string>{"d"});
    other.exec("ROLLBACK");
  });
}

}  // namespace
}  // namespace tally::relay
