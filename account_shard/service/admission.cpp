#include "account_shard/service/admission.hpp"

#include <algorithm>
#include <vector>

namespace tally::shard {

admission admit(const account_queue& q, const admission_policy& p) {
  admission out;
  micros wait{0};
  if (q.in_flight_for) {
    const auto ran = *q.in_flight_for;
    wait += ran < q.batch_time ? q.batch_time - ran : ran;
  }
  // Commands ahead fill batches of max_batch; this one goes in the batch after the full ones.
  const auto full_batches = q.max_batch ? q.queued_ahead / q.max_batch : q.queued_ahead;
  wait += q.batch_time * static_cast<long long>(full_batches);
  out.expected_wait = wait;
  if (!p.enabled() || wait <= p.max_wait) return out;
  out.admitted = false;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait);
  out.retry_after = std::max(ms, std::chrono::milliseconds(1));
  return out;
}

micros expected_batch_time(std::span<const micros> recent) {
  if (recent.empty()) return micros{0};
  std::vector<micros> sorted(recent.begin(), recent.end());
  const auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  return *mid;
}

bool refuse_at_start(micros waited, bool queued_behind_account, const admission_policy& p) {
  return p.enabled() && queued_behind_account && waited > p.max_wait;
}

}  // namespace tally::shard
