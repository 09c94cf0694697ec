#pragma once
// Runs sagas: the engine's decisions, made durable in the saga store, then
// carried out as calls to the shards. Rules it keeps:
// - Write ahead: a saga's new state (with the calls it is about to send) is
//   committed before any of those calls leaves, so whoever loads the saga
//   later knows every call that may have taken effect.
// - One saga's events (answers, wakes, actions) are applied one batch at a
//   time, in order; many sagas' writes share one transaction.
// - Leases: this instance drives only the sagas it holds; it renews them,
//   claims due and abandoned ones, and a write after the lease was lost
//   changes nothing (the store fences it by version).
// - A saga whose next wake is far off (a held deduction waiting for its
//   app) is let go: any instance claims it when it is due, or when an app
//   or operator acts on it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/batching/coalescer.hpp"
#include "common/metrics/metrics.hpp"
#include "orchestrator/engine/engine.hpp"
#include "common/sharding/routing.hpp"
#include "orchestrator/saga/request.hpp"
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
};

class saga_runner {
 public:
  saga_runner(boost::asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
              std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics,
              runner_options options = {});
  ~saga_runner();
  saga_runner(const saga_runner&) = delete;
  saga_runner& operator=(const saga_runner&) = delete;

  // The first heartbeat: this instance's leases are valid from then on.
  boost::asio::awaitable<pg::error> async_open();
  // Starts claiming (with the actions that come with claims) and renewing.
  void start();
  // Stops taking new work, lets the running batches finish (up to `grace`),
  // then gives up every lease.
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
  struct live_saga;
  struct event;
  struct prepared_call;
  struct sent_call {
    std::size_t shard = 0;
    std::string command;
    instant sent{};
  };
  struct save_request {
    saga_write write;
    std::shared_ptr<const saga> keep;  // the saga `write.s` points to
  };
  using save_reply = std::pair<pg::error, std::int64_t>;

  instant now() const;
  const engine& engine_of(const saga& s) const;
  boost::asio::awaitable<save_reply> save(saga_write w, std::shared_ptr<const saga> keep);
  boost::asio::awaitable<void> flush_saves(std::size_t worker, std::vector<save_request>& writes,
                                           std::vector<save_reply>& replies);
  boost::asio::awaitable<result> resolve_refund(saga_request& r);
  std::shared_ptr<live_saga> adopt(stored_saga st);
  void post(const std::shared_ptr<live_saga>& l, event e);
  boost::asio::awaitable<void> drive(std::shared_ptr<live_saga> l);
  std::vector<prepared_call> prepare(live_saga& l, const saga& s, const decision& d, instant t,
                                     std::vector<step_attempt>& attempts) const;
  void dispatch(const std::shared_ptr<live_saga>& l, std::vector<prepared_call> calls);
  void schedule_wake(const std::shared_ptr<live_saga>& l);
  void forget(const std::shared_ptr<live_saga>& l);
  void hand_over(const std::shared_ptr<live_saga>& l);
  void settle_action(std::int64_t id, std::optional<std::string> outcome_text);
  boost::asio::awaitable<void> release(std::string saga_id);
  boost::asio::awaitable<void> claim_loop();
  boost::asio::awaitable<void> renew_loop();
  void deliver(std::vector<pending_action> actions);
  boost::asio::awaitable<result> act_elsewhere(stored_saga st, saga_action action);

  boost::asio::any_io_executor ex_;
  saga_store& store_;
  const sharding::routing_table& routes_;
  std::vector<std::unique_ptr<shard_client>>& shards_;
  runner_options options_;
  std::vector<engine> engines_;  // one per workflow, in workflows() order
  mutable std::mt19937_64 jitter_;
  std::unordered_map<std::string, std::shared_ptr<live_saga>> live_;
  boost::asio::steady_timer claim_now_;
  bool stopping_ = false;
  std::size_t loops_ = 0;  // claim and renew loops still running
  std::size_t driving_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // A saga reached its end state: counted, and its duration by type.
  void note_finished(const saga& s, saga_type type, instant now);

  metrics::counter& started_;
  metrics::counter& replayed_;
  metrics::counter& finished_;
  metrics::counter& claimed_;
  metrics::counter& lost_;
  metrics::counter& calls_;
  metrics::histogram& save_batch_;
  metrics::gauge& live_gauge_;
  std::vector<metrics::histogram*> saga_seconds_;  // by saga_type: creation to its end state
  std::vector<metrics::histogram*> call_seconds_;  // by shard: a call sent to its answer

  // Last: destroyed first.
  batching::coalescer<save_request, save_reply> saves_;
};

}  // namespace tally::orch
