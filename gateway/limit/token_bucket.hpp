#pragma once
// Token-bucket arithmetic, shared by the local limiter and (line for line)
// by the Lua script that runs it atomically in Redis: `rate` tokens a
// second, at most `burst` stored; a request takes one token or is refused
// with the time until one is there.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/retry/backoff.hpp"

namespace tally::gateway {

struct bucket_limit {
  double rate = 100;   // tokens per second
  double burst = 200;  // capacity
};

struct bucket_state {
  double tokens = -1;  // < 0: a new bucket, which starts full
  std::int64_t at_ms = 0;
};

struct take_result {
  bool allowed = false;
  std::int64_t retry_after_ms = 0;  // when refused: until one token is there
};

take_result take(bucket_state& s, const bucket_limit& limit, std::int64_t now_ms);

// Retry-After in whole seconds, rounded up, at least 1.
using retry::retry_after_seconds;

// The in-process fallback while Redis is unreachable: the same buckets,
// counted by this gateway alone. Idle buckets are forgotten.
struct bucket_ref {
  std::string key;
  bucket_limit limit;
};

// All or nothing: a token from every bucket, or none taken and the longest
// wait among the buckets that refused (with its index in `refused`).
struct take_all_result {
  take_result result;
  std::size_t refused = 0;
};

class local_limiter {
 public:
  take_all_result take_all(const std::vector<bucket_ref>& buckets, std::int64_t now_ms);

 private:
  void forget_idle(std::int64_t now_ms);
  std::unordered_map<std::string, bucket_state> buckets_;
  std::int64_t swept_ms_ = 0;
};

}  // namespace tally::gateway
