// The audit job's wait between passes of pages (account_shard/service/
// audit_job.hpp): its share of the time, and never less than the pause.
#include <chrono>

#include <gtest/gtest.h>

#include "account_shard/service/audit_job.hpp"

namespace {

using namespace tally::shard;
using namespace std::chrono_literals;

audit_options share(int percent, std::chrono::milliseconds pause = 20ms) {
  audit_options o;
  o.share_percent = percent;
  o.pause = pause;
  return o;
}

TEST(AuditPause, APassTakesAtMostItsShareOfTheTime) {
  // 20 %: a pass of 300 ms, then 1,200 ms of commands alone.
  EXPECT_EQ(audit_pause(300ms, share(20)), 1200ms);
  EXPECT_EQ(audit_pause(300ms, share(50)), 300ms);
  EXPECT_EQ(audit_pause(100ms, share(1)), 9900ms);
}

TEST(AuditPause, NeverLessThanThePause) {
  EXPECT_EQ(audit_pause(2ms, share(20)), 20ms);
  EXPECT_EQ(audit_pause(0ms, share(20, 0ms)), 0ms);
  // 100 %: the pause alone.
  EXPECT_EQ(audit_pause(5000ms, share(100)), 20ms);
}

}  // namespace
