#pragma once
// How long to pause before trying again, as a pure decision: capped
// exponential backoff (a constant pause when first == max) and, when the
// caller gives up at some point, how many retries it allows. The loops that
// wait (the relay's consumers, the shard's bind, the wait for the database
// at start-up) and the saga engine's retry delays all ask here.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tally::retry {

inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

struct backoff {
  std::chrono::milliseconds first;  // the pause before the first retry
  std::chrono::milliseconds max;    // pauses double up to this
  std::size_t retries = unlimited;  // how many retries before giving up
};

// The pause before retry `n` (0-based): first · 2^n, at most max.
std::chrono::milliseconds delay(const backoff& b, std::size_t n);
// Whether retry `n` (0-based) is one too many.
bool spent(const backoff& b, std::size_t n);

// A pause for an HTTP client's Retry-After: whole seconds, rounded up, at least 1.
std::int64_t retry_after_seconds(std::int64_t retry_after_ms);

}  // namespace tally::retry
