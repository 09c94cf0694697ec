#pragma once
// The saga store's upkeep, every `interval` until its group stops: folds
// the state counts of ended sessions (saga_store::async_fold_counts) and
// compacts the settled sagas older than `detail_retention`, a page at a
// time from the oldest: their recorded attempts go, their rows stay
// (saga_store::async_compact). Every instance may run it; a row goes once.
// A failed pass is logged and the next one tries again.
#include <chrono>
#include <cstddef>

#include <boost/asio/awaitable.hpp>

#include "common/metrics/metrics.hpp"
#include "orchestrator/service/task_group.hpp"
#include "orchestrator/store/saga_store.hpp"

namespace tally::orch {

struct maintenance_options {
  std::chrono::milliseconds interval{60000};
  std::chrono::milliseconds detail_retention{std::chrono::hours(24 * 30)};
  std::size_t compact_page = 500;  // sagas per statement
};

boost::asio::awaitable<void> async_maintain_store(saga_store& store, maintenance_options options,
                                                  metrics::registry& metrics, task_group& group);

}  // namespace tally::orch
