#include "common/failpoint/failpoint.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fp = tally::failpoint;

class failpoint_test : public ::testing::Test {
 protected:
  void SetUp() override { fp::disarm_all(); }
  void TearDown() override { fp::disarm_all(); }
};

TEST_F(failpoint_test, nothing_armed_never_fires) {
  EXPECT_FALSE(fp::hit("ledger.before_commit"));
  EXPECT_EQ(fp::describe(), "");
}

TEST_F(failpoint_test, error_fires_only_for_its_name) {
  fp::arm("ledger.before_commit=error");
  EXPECT_TRUE(fp::hit("ledger.before_commit"));
  EXPECT_TRUE(fp::hit("ledger.before_commit"));
  EXPECT_FALSE(fp::hit("ledger.after_commit"));
}

TEST_F(failpoint_test, off_disarms_one_and_disarm_all_clears) {
  fp::arm("a=error,b=error");
  fp::arm("a=off");
  EXPECT_FALSE(fp::hit("a"));
  EXPECT_TRUE(fp::hit("b"));
  fp::disarm_all();
  EXPECT_FALSE(fp::hit("b"));
  EXPECT_EQ(fp::describe(), "");
}

TEST_F(failpoint_test, delay_sleeps_at_every_hit_and_returns_false) {
  fp::arm("slow=delay:30");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(fp::hit("slow"));
  EXPECT_FALSE(fp::hit("slow"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(60));
}

TEST_F(failpoint_test, describe_renders_a_spec_that_arms_the_same) {
  fp::arm(" z=crash@3 , a=delay:5,m=error,c=crash ");
  const std::string spec = fp::describe();
  EXPECT_EQ(spec, "a=delay:5,c=crash,m=error,z=crash@3");
  fp::disarm_all();
  fp::arm(spec);
  EXPECT_EQ(fp::describe(), spec);
}

TEST_F(failpoint_test, bad_specs_throw_and_change_nothing) {
  fp::arm("keep=error");
  for (const char* bad : {"noequals", "=error", "x=explode", "x=crash@0", "x=crash@", "x=crash@2x",
                          "x=delay:", "x=delay:-1", "ok=error,x=delay:abc"}) {
    EXPECT_THROW(fp::arm(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(fp::describe(), "keep=error");  // not even "ok" from the last one
}

TEST_F(failpoint_test, empty_spec_and_empty_entries_are_ignored) {
  fp::arm("");
  fp::arm(",,a=error,");
  EXPECT_EQ(fp::describe(), "a=error");
}

TEST_F(failpoint_test, arm_from_env_reads_tally_failpoints) {
  ::setenv("TALLY_FAILPOINTS", "env.point=error", 1);
  fp::arm_from_env();
  ::unsetenv("TALLY_FAILPOINTS");
  EXPECT_TRUE(fp::hit("env.point"));
}

TEST_F(failpoint_test, crash_before_the_nth_hit_does_nothing) {
  fp::arm("c=crash@1000");
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(fp::hit("c"));
}

class failpoint_DeathTest : public failpoint_test {
 protected:
  void SetUp() override {
    failpoint_test::SetUp();
    // The child re-executes the binary, so threads started by other tests
    // cannot leave it in a forked-while-locked state.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(failpoint_DeathTest, crash_exits_137_and_logs_the_name) {
  EXPECT_EXIT(
      {
        fp::arm("ledger.before_commit=crash");
        fp::hit("ledger.before_commit");
      },
      ::testing::ExitedWithCode(137), "failpoint crash.*ledger\\.before_commit");
}

TEST_F(failpoint_DeathTest, crash_at_n_fires_exactly_at_the_nth_hit) {
  EXPECT_EXIT(
      {
        fp::arm("c=crash@3");
        fp::hit("c");
        fp::hit("c");
        const char before[] = "two hits survived\n";
        (void)!::write(STDERR_FILENO, before, sizeof before - 1);
        fp::hit("c");
        std::exit(0);
      },
      ::testing::ExitedWithCode(137), "two hits survived\n.*failpoint crash.*\"hit\":3");
}

// Hits from several threads are all counted: with N-1 hits spread over the
// threads nothing happens, and the N-th hit afterwards crashes.
TEST_F(failpoint_DeathTest, hits_are_counted_across_threads) {
  constexpr int threads = 4;
  constexpr int per_thread = 5000;
  EXPECT_EXIT(
      {
        fp::arm("c=crash@" + std::to_string(threads * per_thread + 1));
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t)
          workers.emplace_back([] {
            for (int i = 0; i < per_thread; ++i) fp::hit("c");
          });
        for (auto& w : workers) w.join();
        const char done[] = "threads done\n";
        (void)!::write(STDERR_FILENO, done, sizeof done - 1);
        fp::hit("c");
        std::exit(0);
      },
      ::testing::ExitedWithCode(137), "threads done\n.*failpoint crash");
}

}  // namespace
