#include "common/batching/batch_pick.hpp"

namespace tally::batching {

batch_pick pick_batch(const std::vector<std::string>& keys, const std::unordered_set<std::string>& in_flight,
                      std::size_t max_batch) {
  batch_pick out;
  std::unordered_set<std::string> mine;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& key = keys[i];
    bool ours = mine.contains(key);
    if (!ours && in_flight.contains(key)) continue;
    if (out.taken.size() == max_batch) {
      if (ours) continue;  // waits for this batch, not for another worker
      out.eligible_left = true;
      break;
    }
    if (!ours) {
      mine.insert(key);
      out.claimed.push_back(key);
    }
    out.taken.push_back(i);
  }
  return out;
}

}  // namespace tally::batching
