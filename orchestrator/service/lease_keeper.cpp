#include "orchestrator/service/lease_keeper.hpp"

#include "common/log/log.hpp"
#include "orchestrator/service/saga_driver.hpp"

namespace tally::orch {

boost::asio::awaitable<void> async_keep_leases(saga_store& store, std::chrono::milliseconds lease, task_group& group) {
  do {
    if (auto err = co_await store.async_renew(wall_clock()))
      log::warn("renewing leases failed", {{"error", err.message}});
  } while (co_await group.async_sleep(lease / 3));
}

}  // namespace tally::orch
