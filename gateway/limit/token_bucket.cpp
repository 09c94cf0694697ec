#include "gateway/limit/token_bucket.hpp"

#include <algorithm>
#include <cmath>

namespace tally::gateway {

namespace {
constexpr std::int64_t sweep_every_ms = 10'000;
constexpr std::size_t sweep_above = 10'000;
}  // namespace

take_result take(bucket_state& s, const bucket_limit& limit, std::int64_t now_ms) {
  if (s.tokens < 0) s = {limit.burst, now_ms};
  const double elapsed = static_cast<double>(std::max<std::int64_t>(0, now_ms - s.at_ms)) / 1000.0;
  s.tokens = std::min(limit.burst, s.tokens + elapsed * limit.rate);
  s.at_ms = std::max(s.at_ms, now_ms);
  if (s.tokens >= 1) {
    s.tokens -= 1;
    return {true, 0};
  }
  const double wait_s = (1 - s.tokens) / limit.rate;
  return {false, static_cast<std::int64_t>(std::ceil(wait_s * 1000.0))};
}

take_all_result local_limiter::take_all(const std::vector<bucket_ref>& buckets, std::int64_t now_ms) {
  forget_idle(now_ms);
  std::vector<bucket_state> next;
  next.reserve(buckets.size());
  take_all_result out{{true, 0}, 0};
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    auto it = buckets_.find(buckets[i].key);
    next.push_back(it == buckets_.end() ? bucket_state{} : it->second);
    auto r = take(next.back(), buckets[i].limit, now_ms);
    if (!r.allowed && (out.result.allowed || r.retry_after_ms > out.result.retry_after_ms)) out = {r, i};
  }
  if (!out.result.allowed) return out;
  for (std::size_t i = 0; i < buckets.size(); ++i) buckets_[buckets[i].key] = next[i];
  return out;
}

// A bucket left alone long enough is full again, the same as a new one.
void local_limiter::forget_idle(std::int64_t now_ms) {
  if (buckets_.size() < sweep_above || now_ms - swept_ms_ < sweep_every_ms) return;
  swept_ms_ = now_ms;
  std::erase_if(buckets_, [now_ms](const auto& kv) { return now_ms - kv.second.at_ms > 60'000; });
}

}  // namespace tally::gateway
