#include "orchestrator/service/maintenance.hpp"

#include "common/log/log.hpp"
#include "orchestrator/service/saga_driver.hpp"

namespace tally::orch {

namespace {

// Compacts page after page until a short one; false when a statement failed.
boost::asio::awaitable<bool> compact(saga_store& store, const maintenance_options& options, metrics::counter& sagas,
                                     metrics::counter& attempts, task_group& group) {
  const auto before = wall_clock() - options.detail_retention;
  std::string after;
  while (!group.stopped()) {
    auto page = co_await store.async_compact(before, after, options.compact_page);
    if (page.error) {
      log::warn("compacting settled sagas failed", {{"error", page.error.message}});
      co_return false;
    }
    sagas.inc(static_cast<std::uint64_t>(page.sagas));
    attempts.inc(static_cast<std::uint64_t>(page.attempts));
    if (page.sagas_read < static_cast<std::int64_t>(options.compact_page)) break;
    after = std::move(page.last);
  }
  co_return true;
}

}  // namespace

boost::asio::awaitable<void> async_maintain_store(saga_store& store, maintenance_options options,
                                                  metrics::registry& metrics, task_group& group) {
  auto& sagas = metrics.add_counter("tally_orch_sagas_compacted_total",
                                    "Settled sagas past the detail retention whose attempts were removed");
  auto& attempts = metrics.add_counter("tally_orch_attempts_compacted_total", "Attempts removed by compaction");
  while (co_await group.async_sleep(options.interval)) {
    if (auto err = co_await store.async_fold_counts())
      log::warn("folding the saga counts failed", {{"error", err.message}});
    co_await compact(store, options, sagas, attempts, group);
  }
}

}  // namespace tally::orch
