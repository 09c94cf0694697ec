#include "common/retry/backoff.hpp"

#include <algorithm>

namespace tally::retry {

std::chrono::milliseconds delay(const backoff& b, std::size_t n) {
  auto d = b.first;
  for (std::size_t i = 0; i < n && d < b.max; ++i) d *= 2;
  return std::min(d, b.max);
}

bool spent(const backoff& b, std::size_t n) { return n >= b.retries; }

std::int64_t retry_after_seconds(std::int64_t retry_after_ms) {
  return std::max<std::int64_t>(1, (retry_after_ms + 999) / 1000);
}

}  // namespace tally::retry
