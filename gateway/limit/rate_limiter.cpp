#include "gateway/limit/rate_limiter.hpp"

#include <algorithm>
#include <chrono>

namespace tally::gateway {

namespace asio = boost::asio;

namespace {

// The arithmetic of token_bucket.cpp's take(), for every bucket at once.
// KEYS: buckets; ARGV: rate and burst of each in turn. Returns {allowed,
// retry_after_ms, index of the bucket that refused (1-based)}.
const redis::script take_all_script(R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local states = {}
local worst, worst_i = -1, 0
for i = 1, #KEYS do
  local rate, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local h = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens, at = tonumber(h[1]), tonumber(h[2])
  if not tokens or not at then tokens, at = burst, now end
  tokens = math.min(burst, tokens + math.max(0, now - at) / 1000 * rate)
  at = math.max(at, now)
  if tokens < 1 then
    local wait = math.ceil((1 - tokens) / rate * 1000)
    if wait > worst then worst, worst_i = wait, i end
  end
  states[i] = {tokens, at, math.ceil(burst / rate * 1000) + 1000}
end
if worst_i > 0 then return {0, worst, worst_i} end
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], 'tokens', tostring(states[i][1] - 1), 'at', tostring(states[i][2]))
  redis.call('PEXPIRE', KEYS[i], states[i][3])
end
return {1, 0, 0}
)lua");

}  // namespace

rate_limiter::rate_limiter(redis::client& redis, rate_limits limits, metrics::registry& metrics)
    : redis_(redis),
      limits_(limits),
      refused_(metrics.add_counter("tally_gateway_rate_limited_total", "Requests refused by a rate limit")),
      fallback_(metrics.add_counter("tally_gateway_rate_limit_local_total",
                                    "Rate-limit decisions made in process because Redis was unreachable")) {}

asio::awaitable<admission> rate_limiter::async_admit(const principal& who, std::span<const std::string> accounts) {
  std::vector<bucket_ref> buckets;
  buckets.reserve(1 + accounts.size());
  buckets.push_back({"tally:rl:key:" + who.key_id, limits_.per_key});
  for (const auto& a : accounts) buckets.push_back({"tally:rl:account:" + who.tenant + "/" + a, limits_.per_account});

  std::vector<std::string> keys, args;
  for (const auto& b : buckets) {
    keys.push_back(b.key);
    args.push_back(std::to_string(b.limit.rate));
    args.push_back(std::to_string(b.limit.burst));
  }
  auto r = co_await redis_.async_eval(take_all_script, std::move(keys), std::move(args));
  admission out;
  std::size_t refused_index = 0;
  if (r.ok() && r.v.elements.size() == 3) {
    out.allowed = r.v.elements[0].integer == 1;
    out.retry_after_s = retry_after_seconds(r.v.elements[1].integer);
    refused_index = static_cast<std::size_t>(std::max<std::int64_t>(1, r.v.elements[2].integer) - 1);
  } else {
    fallback_.inc();
    const auto now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    auto local = local_.take_all(buckets, now);
    out.allowed = local.result.allowed;
    out.retry_after_s = retry_after_seconds(local.result.retry_after_ms);
    out.local = true;
    refused_index = local.refused;
  }
  if (!out.allowed) {
    refused_.inc();
    out.scope = refused_index == 0 ? "api_key" : "account";
  }
  co_return out;
}

}  // namespace tally::gateway
