// Hot-account admission's decisions (account_shard/service/admission.hpp),
// without a queue: the expected wait from what the queue knows, admit or
// refuse against the maximum wait, the refusal when a batch starts, and
// admission switched off.
#include "account_shard/service/admission.hpp"

#include <array>
#include <chrono>

#include <gtest/gtest.h>

namespace {

using namespace tally::shard;
using namespace std::chrono_literals;

constexpr admission_policy twenty_ms{20ms};
constexpr admission_policy off{0ms};

account_queue queue(std::size_t ahead, std::optional<micros> running, micros batch_time, std::size_t max_batch) {
  account_queue q;
  q.queued_ahead = ahead;
  q.in_flight_for = running;
  q.batch_time = batch_time;
  q.max_batch = max_batch;
  return q;
}

TEST(Admission, AFreeAccountIsAdmittedWithoutWaiting) {
  const auto a = admit(queue(0, std::nullopt, 5ms, 1000), twenty_ms);
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.expected_wait, 0us);
}

TEST(Admission, CommandsAheadThatFitTheNextBatchCostOnlyTheRunningBatchsRest) {
  // A batch has run 2 ms of its expected 5; 999 queued ahead all fit the next batch with this one.
  const auto a = admit(queue(999, 2ms, 5ms, 1000), twenty_ms);
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.expected_wait, 3ms);
}

TEST(Admission, EveryFullBatchAheadCostsOneBatchTime) {
  // 8 per batch: 24 ahead fill 3 batches, then this one's; plus the running batch's rest (4 ms).
  const auto a = admit(queue(24, 1ms, 5ms, 8), twenty_ms);
  EXPECT_EQ(a.expected_wait, 4ms + 3 * 5ms);
  EXPECT_TRUE(a.admitted);  // 19 ms: below the wait
  const auto b = admit(queue(32, 1ms, 5ms, 8), twenty_ms);
  EXPECT_EQ(b.expected_wait, 4ms + 4 * 5ms);
  EXPECT_FALSE(b.admitted);  // 24 ms: above it
  EXPECT_EQ(b.retry_after, 24ms);
}

TEST(Admission, AWaitOfExactlyTheMaximumIsAdmitted) {
  EXPECT_TRUE(admit(queue(4, std::nullopt, 5ms, 1), twenty_ms).admitted);      // 4 batches of 5 ms
  EXPECT_FALSE(admit(queue(5, std::nullopt, 5ms, 1), twenty_ms).admitted);     // 25 ms
  EXPECT_FALSE(admit(queue(40, std::nullopt, 501us, 1), twenty_ms).admitted);  // 20.04 ms
}

TEST(Admission, AnOverdueBatchIsExpectedToRunAsLongAgainAsItHas) {
  // Expected 5 ms, running for 12: another 12 ms expected.
  const auto a = admit(queue(0, 12ms, 5ms, 1000), twenty_ms);
  EXPECT_EQ(a.expected_wait, 12ms);
  EXPECT_TRUE(a.admitted);
  // A commit stalled past the safe wait refuses what would queue behind it.
  const auto b = admit(queue(0, 21ms, 5ms, 1000), twenty_ms);
  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.retry_after, 21ms);
}

TEST(Admission, BeforeAnyBatchIsMeasuredOnlyARunningBatchCounts) {
  EXPECT_TRUE(admit(queue(5000, std::nullopt, 0us, 1), twenty_ms).admitted);
  EXPECT_FALSE(admit(queue(0, 25ms, 0us, 1), twenty_ms).admitted);
}

TEST(Admission, ARefusalSuggestsAtLeastOneMillisecondRoundedUp) {
  const auto a = admit(queue(21, std::nullopt, 1001us, 1), twenty_ms);
  ASSERT_FALSE(a.admitted);
  EXPECT_EQ(a.expected_wait, 21 * 1001us);
  EXPECT_EQ(a.retry_after, 22ms);  // 21.021 ms, rounded up
  const admission_policy tiny{1us};
  const auto b = admit(queue(0, 2us, 1us, 1), tiny);
  ASSERT_FALSE(b.admitted);
  EXPECT_EQ(b.retry_after, 1ms);
}

TEST(Admission, ZeroMaximumWaitAdmitsEverything) {
  EXPECT_FALSE(off.enabled());
  const auto a = admit(queue(1'000'000, 10s, 50ms, 1), off);
  EXPECT_TRUE(a.admitted);
  EXPECT_GT(a.expected_wait, 20ms);  // still estimated, for the figures
  EXPECT_FALSE(refuse_at_start(10s, true, off));
}

TEST(Admission, AtStartOnlyACommandThatWaitedBehindItsAccountPastTheMaximumIsRefused) {
  EXPECT_FALSE(refuse_at_start(20ms, true, twenty_ms));  // exactly the maximum: starts
  EXPECT_TRUE(refuse_at_start(20001us, true, twenty_ms));
  // Its account was free when it came: the wait was for a worker (the whole shard is busy), not the account's.
  EXPECT_FALSE(refuse_at_start(5s, false, twenty_ms));
  EXPECT_FALSE(refuse_at_start(1ms, true, twenty_ms));
}

TEST(Admission, TheExpectedBatchTimeIsTheMedianOfTheRecentOnes) {
  EXPECT_EQ(expected_batch_time({}), 0us);
  const std::array<micros, 1> one{7ms};
  EXPECT_EQ(expected_batch_time(one), 7ms);
  // One stall does not move it.
  const std::array<micros, 5> recent{3ms, 4ms, 900ms, 5ms, 4ms};
  EXPECT_EQ(expected_batch_time(recent), 4ms);
  const std::array<micros, 4> even{1ms, 2ms, 3ms, 4ms};
  EXPECT_EQ(expected_batch_time(even), 3ms);  // the upper middle
}

}  // namespace
