// Capped exponential backoff and when a retrying loop gives up.
#include "common/retry/backoff.hpp"

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using tally::retry::backoff;
using tally::retry::delay;
using tally::retry::spent;

// Was the relay's own backoff (tests/relay): its consumers' retries.
TEST(Backoff, DoublesToItsCap) {
  const backoff b{50ms, 1000ms};
  EXPECT_EQ(delay(b, 0), 50ms);
  EXPECT_EQ(delay(b, 1), 100ms);
  EXPECT_EQ(delay(b, 4), 800ms);
  EXPECT_EQ(delay(b, 5), 1000ms);  // 1600 capped
  EXPECT_EQ(delay(b, 1000), 1000ms);
}

TEST(Backoff, FirstEqualToMaxIsAConstantPause) {
  const backoff b{100ms, 100ms, 3};
  EXPECT_EQ(delay(b, 0), 100ms);
  EXPECT_EQ(delay(b, 2), 100ms);
}

TEST(Backoff, AFirstPauseOverTheMaxIsCapped) { EXPECT_EQ(delay(backoff{2s, 1s}, 0), 1s); }

TEST(Backoff, GivesUpAfterItsRetries) {
  const backoff b{1s, 1s, 2};
  EXPECT_FALSE(spent(b, 0));
  EXPECT_FALSE(spent(b, 1));
  EXPECT_TRUE(spent(b, 2));
  EXPECT_FALSE(spent(backoff{1s, 1s}, 1'000'000));  // unlimited by default
}

}  // namespace
