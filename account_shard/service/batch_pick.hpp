#pragma once
// Which queued commands the next batch takes. Pure, so the rule that keeps
// concurrent batches apart is tested without a database.
#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

namespace tally::shard {

struct batch_pick {
  std::vector<std::size_t> taken;    // queue positions, in queue order
  std::vector<std::string> claimed;  // accounts the batch now holds, each once
  bool eligible_left = false;        // takeable commands stayed queued (batch full)
};

// account_keys[i]: the account of the i-th queued command. Takes, in queue
// order and up to max_batch, every command whose account no running batch
// holds (`in_flight`). A command on a held account stays queued, and so do
// the later ones on that account, which keeps each account's commands in
// arrival order.
batch_pick pick_batch(const std::vector<std::string>& account_keys, const std::unordered_set<std::string>& in_flight,
                      std::size_t max_batch);

}  // namespace tally::shard
