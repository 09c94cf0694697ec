#include "common/batching/batch_pick.hpp"

#include <gtest/gtest.h>

namespace tally::batching {
namespace {

using keys = std::vector<std::string>;
using positions = std::vector<std::size_t>;

TEST(BatchPick, TakesEverythingWhenNothingIsInFlight) {
  auto p = pick_batch(keys{"a", "b", "a", "c"}, {}, 10);
  EXPECT_EQ(p.taken, (positions{0, 1, 2, 3}));
  EXPECT_EQ(p.claimed, (keys{"a", "b", "c"}));
  EXPECT_FALSE(p.eligible_left);
}

TEST(BatchPick, LeavesCommandsOnAccountsARunningBatchHolds) {
  auto p = pick_batch(keys{"a", "b", "a", "c", "b"}, {"b"}, 10);
  EXPECT_EQ(p.taken, (positions{0, 2, 3}));
  EXPECT_EQ(p.claimed, (keys{"a", "c"}));
  EXPECT_FALSE(p.eligible_left);  // what stayed is waiting, not takeable
}

TEST(BatchPick, NothingTakeableWhenEveryAccountIsHeld) {
  auto p = pick_batch(keys{"hot", "hot", "hot"}, {"hot"}, 10);
  EXPECT_TRUE(p.taken.empty());
  EXPECT_TRUE(p.claimed.empty());
  EXPECT_FALSE(p.eligible_left);
}

TEST(BatchPick, StopsAtMaxBatchAndSaysMoreIsReady) {
  auto p = pick_batch(keys{"a", "b", "c", "d"}, {}, 2);
  EXPECT_EQ(p.taken, (positions{0, 1}));
  EXPECT_EQ(p.claimed, (keys{"a", "b"}));
  EXPECT_TRUE(p.eligible_left);
}

TEST(BatchPick, FullBatchWithOnlyHeldCommandsLeftSaysNothingMoreIsReady) {
  // "c" is held by another batch; "a" is held by this one once it is full.
  auto p = pick_batch(keys{"a", "b", "c"}, {"c"}, 2);
  EXPECT_EQ(p.taken, (positions{0, 1}));
  EXPECT_FALSE(p.eligible_left);
}

TEST(BatchPick, KeepsAnAccountsLaterCommandsBehindItsEarlierOnes) {
  // The batch is full before the second "a": it must not overtake into a
  // concurrent batch, because "a" is now this batch's.
  auto p = pick_batch(keys{"a", "b", "a"}, {}, 2);
  EXPECT_EQ(p.taken, (positions{0, 1}));
  EXPECT_EQ(p.claimed, (keys{"a", "b"}));
  EXPECT_FALSE(p.eligible_left);  // no other worker may take the second "a"
}

TEST(BatchPick, EmptyQueue) {
  auto p = pick_batch({}, {"a"}, 5);
  EXPECT_TRUE(p.taken.empty());
  EXPECT_FALSE(p.eligible_left);
}

}  // namespace
}  // namespace tally::batching
