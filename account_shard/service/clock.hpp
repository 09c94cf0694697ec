#pragma once
// The shard's clock, which decides when a lot is due. Tests move it (an
// offset from the system clock, set through POST /v1/admin/clock when the
// shard is started with testing.clock_control) so that an expiry can be
// checked at a given instant without waiting for it.
#include <chrono>
#include <cstdint>

namespace tally::shard {

class shard_clock {
 public:
  std::int64_t now_ms() const {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() + offset_ms_;
  }
  std::int64_t offset_ms() const { return offset_ms_; }
  void set_offset_ms(std::int64_t offset) { offset_ms_ = offset; }

 private:
  std::int64_t offset_ms_ = 0;
};

}  // namespace tally::shard
