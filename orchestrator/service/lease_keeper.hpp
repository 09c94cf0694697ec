#pragma once
// The instance's heartbeat: every third of the lease it extends every lease
// this instance holds (one row), until its group stops. A failed beat is
// logged and the next one tries again; leases lapse only after a whole
// lease without one.
#include <chrono>

#include <boost/asio/awaitable.hpp>

#include "orchestrator/service/task_group.hpp"
#include "orchestrator/store/saga_store.hpp"

namespace tally::orch {

boost::asio::awaitable<void> async_keep_leases(saga_store& store, std::chrono::milliseconds lease, task_group& group);

}  // namespace tally::orch
