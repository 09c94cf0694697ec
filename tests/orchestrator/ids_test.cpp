// Saga ids: the ULID layout, checked against values computed independently
// (Python), time order, and the shards' alphabet.
#include "orchestrator/saga/ids.hpp"

#include <gtest/gtest.h>

#include "common/validate/fields.hpp"

namespace tally::orch {
namespace {

const instant t{std::chrono::milliseconds(1'764'583'200'123)};

TEST(SagaId, MatchesTheUlidLayout) {
  EXPECT_EQ(new_saga_id(instant{}, {}), "sg_00000000000000000000000000");
  std::array<std::uint8_t, 10> ones;
  ones.fill(0xff);
  EXPECT_EQ(new_saga_id(t, ones), "sg_01KBCNNNBVZZZZZZZZZZZZZZZZ");
  EXPECT_EQ(new_saga_id(t, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), "sg_01KBCNNNBV041061050R3GG28A");
}

TEST(SagaId, SortsByCreationTimeAndFitsTheShardIds) {
  std::array<std::uint8_t, 10> high;
  high.fill(0xff);
  const auto earlier = new_saga_id(t, high);
  const auto later = new_saga_id(t + std::chrono::milliseconds(1), {});
  EXPECT_LT(earlier, later);
  EXPECT_TRUE(validate::is_valid_id(later));
  EXPECT_TRUE(is_saga_id(earlier));
  EXPECT_TRUE(is_saga_id(later));
}

TEST(SagaId, RecognisesOnlyItsOwnShape) {
  EXPECT_FALSE(is_saga_id(""));
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000"));  // 25 characters
  EXPECT_FALSE(is_saga_id("xx_00000000000000000000000000"));
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000I"));  // not Crockford
  EXPECT_FALSE(is_saga_id("sg_80000000000000000000000000"));  // more than 128 bits
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000a"));  // lower case
}

}  // namespace
}  // namespace tally::orch
