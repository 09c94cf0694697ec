#pragma once
// A fresh, migrated saga store database for each test of the store on a
// real PostgreSQL, a pool's settings for it, and a fixed clock's start.
#include <gtest/gtest.h>

#include <string>

#include "common/migrate/migrate.hpp"
#include "common/pg/pool.hpp"
#include "orchestrator/engine/engine.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::orch::testing {

inline const instant t0{std::chrono::milliseconds(1'764'583'200'000)};

class store_test : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = tally::test::pg_conninfo(tally::test::create_database("orch_store"));
    const auto migrations = migrate::load(tally::test::source_dir() + "/migrations/orchestrator");
    ASSERT_EQ(migrate::apply(db_, migrations).applied, static_cast<int>(migrations.size()));
  }
  pg::pool_options options() const {
    pg::pool_options o;
    o.conninfo = db_;
    o.max_size = 4;
    return o;
  }
  // Runs the coroutine `body(pool)` to its end, the pool on this test's database.
  template <typename Body>
  void run_on_pool(Body body) const {
    tally::test::run_coroutine([&](boost::asio::io_context& io) -> boost::asio::awaitable<void> {
      pg::pool pool(io.get_executor(), options());
      co_await body(pool);
    });
  }
  std::int64_t count(const std::string& sql) const { return tally::test::query_int(db_, sql); }

  std::string db_;
};

}  // namespace tally::orch::testing
