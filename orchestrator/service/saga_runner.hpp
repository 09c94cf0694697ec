#pragma once
// Runs sagas: the engine's decisions, made durable in the saga store, then
// carried out as calls to the shards. Rules it keeps:
// - Write ahead, once: a saga's creation (with its first calls), every
//   state that sends compensation, answers an action or lets the saga go is
//   committed before its calls leave. Forward steps the workflow marks
//   sendable before saving (up to a pivot that can be undone, and
//   forward-only steps after it) go out at once and are written with the
//   saga's next change; recovery treats them as unknown and re-sends them
//   by key (workflow_def::sendable_before_saving, docs/orchestrator.md).
// - One saga's events (answers, wakes, actions) are applied one batch at a
//   time, in order; many sagas' writes share one transaction.
// - Leases: this instance drives only the sagas it holds; it renews them,
//   claims due and abandoned ones, and a write after the lease was lost
//   changes nothing (the store fences it by version).
// - A saga whose next wake is far off (a held deduction waiting for its
//   app) is let go: any instance claims it when it is due, or when an app
//   or operator acts on it.
//
// The parts: saga_driver (the sagas held here), claimer, lease_keeper,
// remote_actions (actions on sagas held elsewhere), all started in task
// groups this façade stops and joins at shutdown.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/metrics/metrics.hpp"
#include "common/pg/listener.hpp"
#include "common/sharding/routing.hpp"
#include "orchestrator/saga/request.hpp"
#include "orchestrator/service/claimer.hpp"
#include "orchestrator/service/remote_actions.hpp"
#include "orchestrator/service/saga_driver.hpp"
#include "orchestrator/service/maintenance.hpp"
#include "orchestrator/service/task_group.hpp"
#include "orchestrator/store/saga_store.hpp"
#include "orchestrator/transport/shard_client.hpp"

namespace tally::orch {

struct runner_options {
  std::chrono::milliseconds lease{5000};
  std::chrono::milliseconds claim_interval{100};
  std::size_t claim_batch = 200;
  // Sagas that sleep longer than this are let go.
  std::chrono::milliseconds keep_horizon{10000};
  std::size_t save_batch = 256;
  std::size_t save_connections = 2;
  // How long an action on a saga held by another instance may take.
  std::chrono::milliseconds action_timeout{5000};
  // How often such an action's result is read without a notification.
  std::chrono::milliseconds action_recheck{1000};
  maintenance_options maintenance{};
};

class saga_runner {
 public:
  saga_runner(boost::asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
              std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics,
              runner_options options = {});
  // async_stop() must have returned before the runner goes.
  ~saga_runner();
  saga_runner(const saga_runner&) = delete;
  saga_runner& operator=(const saga_runner&) = delete;

  // The first heartbeat: this instance's leases are valid from then on.
  boost::asio::awaitable<pg::error> async_open();
  // Starts claiming (with the actions that come with claims), renewing and
  // listening for the store's notifications.
  void start();
  // Stops taking new work, lets the running batches finish (up to `grace`),
  // then gives up every lease and waits for what it started to end.
  boost::asio::awaitable<void> async_stop(std::chrono::milliseconds grace);

  enum class outcome { created, replayed, conflict, done, already, invalid_state, not_found, unavailable, invalid };
  struct result {
    outcome kind = outcome::unavailable;
    std::optional<stored_saga> saga{};
    std::string message{};
  };

  // Records a new saga durably and starts it (a refund first resolves its
  // original: unknown → not_found, not a completed deduction or transfer →
  // invalid_state).
  boost::asio::awaitable<result> async_start(saga_request request);
  // Confirm, cancel, abort or retry, wherever the saga is held.
  boost::asio::awaitable<result> async_act(std::string tenant, std::string saga_id, saga_action action);
  // The saga, after waiting up to `wait` for it to finish, or with
  // `or_awaiting` also for it to wait for its app's confirmation.
  boost::asio::awaitable<result> async_get(std::string tenant, std::string saga_id, std::chrono::milliseconds wait,
                                           bool or_awaiting = false);

 private:
  result judge_finished(stored_saga st, saga_action action) const;
  boost::asio::awaitable<result> resolve_refund(saga_request& r);
  boost::asio::awaitable<result> act_elsewhere(stored_saga st, saga_action action);

  boost::asio::any_io_executor ex_;
  saga_store& store_;
  runner_options options_;
  task_group work_;      // drivers, calls, the store's bookkeeping, the listener
  task_group claiming_;  // the claimer, the lease keeper and the store's upkeep: stopped first
  saga_driver driver_;
  claimer claimer_;
  remote_actions remote_;
  pg::listener listener_;
  bool stopping_ = false;

  metrics::counter& started_;
  metrics::counter& replayed_;
  metrics::registry& metrics_;  // for the upkeep's counters
};

}  // namespace tally::orch
