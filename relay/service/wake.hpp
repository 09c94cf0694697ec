#pragma once
// When a source's consumers read again without a notification, as a pure
// decision. A notification wakes them at once (source_feed); besides:
// - after a read that found events the horizon has not passed yet (their
//   transactions committed, or an older one of the server is still
//   running), a short retry, doubling while events stay pending: the
//   transactions that hold the horizon back may notify nothing when they
//   end (a claim, another database's write);
// - otherwise a slow fallback, counted from the last wake, for a
//   notification lost with the listening connection or never sent.
#include <chrono>
#include <cstddef>
#include <optional>

#include "common/retry/backoff.hpp"

namespace tally::relay {

class wake_schedule {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  wake_schedule(std::chrono::milliseconds fallback, retry::backoff pending, time_point now)
      : fallback_(fallback), pending_(pending), last_wake_(now) {}

  // Any wake: the fallback counts from here, and a retry planned is dropped
  // (the reads the wake causes decide again).
  void woken(time_point now) {
    last_wake_ = now;
    retry_at_.reset();
  }
  // After a round of reads: whether any left events pending below a full batch.
  void read(time_point now, bool pending) {
    if (!pending) {
      retries_ = 0;
      retry_at_.reset();
      return;
    }
    if (!retry_at_) retry_at_ = now + retry::delay(pending_, retries_++);
  }
  // The next wake without a notification.
  time_point due() const {
    const auto fallback = last_wake_ + fallback_;
    return retry_at_ && *retry_at_ < fallback ? *retry_at_ : fallback;
  }

 private:
  std::chrono::milliseconds fallback_;
  retry::backoff pending_;
  time_point last_wake_;
  std::optional<time_point> retry_at_;
  std::size_t retries_ = 0;
};

}  // namespace tally::relay
