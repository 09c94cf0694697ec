#pragma once
// Which queued items a keyed coalescer's next batch takes. Pure, so the rule
// that keeps concurrent batches apart is tested without I/O.
#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

namespace tally::batching {

struct batch_pick {
  std::vector<std::size_t> taken;    // queue positions, in queue order
  std::vector<std::string> claimed;  // keys the batch now holds, each once
  bool eligible_left = false;        // takeable items stayed queued (batch full)
};

// keys[i]: the key of the i-th queued item (the shard's: its command's
// account). Takes, in queue order and up to max_batch, every item whose key
// no running batch holds (`in_flight`). An item with a held key stays
// queued, and so do the later ones with that key, which keeps each key's
// items in arrival order.
batch_pick pick_batch(const std::vector<std::string>& keys, const std::unordered_set<std::string>& in_flight,
                      std::size_t max_batch);

}  // namespace tally::batching
