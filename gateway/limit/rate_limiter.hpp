#pragma once
// Rate limits shared by every gateway: a token bucket per API key and one
// per account a write names (hot-account protection), taken all or nothing
// by one Lua script in Redis on Redis' clock. While Redis is unreachable
// the gateway's own in-process buckets decide, so requests keep flowing.
#include <cstdint>
#include <span>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/metrics/metrics.hpp"
#include "common/redis/client.hpp"
#include "gateway/auth/api_keys.hpp"
#include "gateway/limit/token_bucket.hpp"

namespace tally::gateway {

struct rate_limits {
  bucket_limit per_key{1000, 2000};
  // From what one account sustains on a shard with group commit within its
  // 20 ms safe wait (docs/benchmarks.md, "One account's ceiling": about
  // 9,700 debits/s): a write costs up to 2 commands on an account (hold and
  // capture), halved again for margin; a burst of 100 writes is about the
  // 200 commands one account's batch commits within the safe wait.
  bucket_limit per_account{2000, 100};
};

struct admission {
  bool allowed = true;
  std::int64_t retry_after_s = 0;
  std::string scope;   // what refused: "api_key" or "account"
  bool local = false;  // decided by the in-process fallback
};

class rate_limiter {
 public:
  rate_limiter(redis::client& redis, rate_limits limits, metrics::registry& metrics);
  boost::asio::awaitable<admission> async_admit(const principal& who, std::span<const std::string> accounts);

 private:
  redis::client& redis_;
  rate_limits limits_;
  local_limiter local_;
  metrics::counter& refused_;
  metrics::counter& fallback_;
};

}  // namespace tally::gateway
