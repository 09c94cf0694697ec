#pragma once
// Drives the sagas this instance holds. A live saga's events (answers,
// wake-ups, recovery, actions) are applied one batch at a time by its
// workflow's engine; the new state, with the calls it is about to send, is
// written ahead of them (many sagas' writes share one transaction), except
// for the forward steps its workflow may send before saving
// (workflow_def::sendable_before_saving), which go out at once and are
// written with its next change; each answer becomes an event. A saga whose
// write is refused (another instance took it) or fails, that ends, or whose
// next wake is far off is let go: its wake-up, its waiters and the answers
// still in flight stop touching it, and its pending actions go back to the
// store.
//
// Every coroutine it starts runs in the task group it is given: the owner
// stops and joins that group before the driver goes.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/batching/coalescer.hpp"
#include "common/metrics/metrics.hpp"
#include "common/sharding/routing.hpp"
#include "orchestrator/engine/engine.hpp"
#include "orchestrator/saga/request.hpp"
#include "orchestrator/service/task_group.hpp"
#include "orchestrator/store/saga_store.hpp"
#include "orchestrator/transport/shard_client.hpp"

namespace tally::orch {

// An app's or operator's action on a saga this instance drives, and the
// requester waiting for its result.
struct action_wait {
  explicit action_wait(boost::asio::any_io_executor ex) : timer(ex, boost::asio::steady_timer::time_point::max()) {}
  boost::asio::steady_timer timer;
  std::optional<engine::request_result> result;  // unset: the saga's write failed or went elsewhere
};

struct saga_event {
  enum class kind { answer, wake, recover, action } what = kind::wake;
  call_ref ref{};
  int attempt = 0;
  answer reply{};
  saga_action action = saga_action::retry;
  std::int64_t action_id = 0;             // a stored action to finish, else 0
  std::shared_ptr<action_wait> waiter{};  // a requester in this instance
};

// A call sent and not answered yet: what its attempt record needs when the
// answer comes.
struct sent_call {
  std::size_t shard = 0;
  std::string command;
  instant sent{};
};

struct live_saga {
  explicit live_saga(boost::asio::any_io_executor ex) : wake(ex) {}
  std::shared_ptr<const saga> s;  // the durable state; replaced, never changed in place
  std::int64_t version = 0;
  saga_type type = saga_type::credit;
  std::string request_hash;
  instant updated{};
  std::deque<saga_event> inbox;
  bool driving = false;
  bool gone = false;  // let go: nothing more is scheduled for it
  boost::asio::steady_timer wake;
  // By (step, item, undo, attempt).
  std::map<std::tuple<std::size_t, std::size_t, bool, int>, sent_call> sent;
  std::vector<boost::asio::steady_timer*> waiters;  // woken by every durable change
  // Sent before their state was written (sendable_before_saving): written
  // with the next save, as is whether the state changed meanwhile.
  std::vector<step_attempt> unsaved_attempts;
  bool unsaved_change = false;

  stored_saga snapshot() const { return {*s, type, request_hash, version, updated}; }
  void notify() {
    for (auto* w : waiters) w->cancel();
    waiters.clear();
  }
  // No longer driven here: nothing more is scheduled, waiters look again.
  void stop() {
    gone = true;
    wake.cancel();
    notify();
  }
};

// A workflow and its engine, looked up once per round of a saga's events.
struct workflow_engine {
  const workflow_def* workflow;
  engine eng;
};

// The engine's clock: wall time in whole milliseconds.
instant wall_clock();

// Whether a saga in this state stays leased to this instance: it is not
// finished and its next wake is within `horizon`.
bool keeps_lease(const saga& s, instant now, std::chrono::milliseconds horizon);
engine::request_result apply_action(const engine& e, saga& s, saga_action a, instant now, decision& d);

struct driver_options {
  std::chrono::milliseconds keep_horizon{10000};
  std::size_t save_batch = 256;
  std::size_t save_connections = 2;
};

class saga_driver {
 public:
  saga_driver(boost::asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
              std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics, driver_options options,
              task_group& work);
  saga_driver(const saga_driver&) = delete;
  saga_driver& operator=(const saga_driver&) = delete;

  const workflow_engine& flow_of(const saga& s) const;

  // The saga if this instance drives it, else null.
  std::shared_ptr<live_saga> find(const std::string& saga_id) const;
  std::size_t size() const { return live_.size(); }
  // Whether a write or a call is still under way.
  bool busy() const;

  struct begun {
    pg::error error;
    std::shared_ptr<live_saga> live;  // null (without an error): its (tenant, type, biz_id) exists
  };
  // Starts a new saga (`s` as created, not started): its state and first
  // calls are written, then the calls sent.
  boost::asio::awaitable<begun> async_begin(std::shared_ptr<saga> s, saga_type type, std::string request_hash);
  // Sagas the store handed over with a claim: each recovers (re-sends what
  // is in flight) with the actions taken for it, in one write.
  void take_claimed(saga_store::load_result claim);
  // An event for a saga this instance drives.
  void post(const std::shared_ptr<live_saga>& l, saga_event e);
  // Stops driving every saga (at shutdown).
  void let_all_go();

 private:
  struct prepared_call {
    call_ref ref;
    int attempt = 0;
    std::size_t shard = 0;
    std::string command;  // its wire form
  };
  struct save_request {
    saga_write write;
    std::shared_ptr<const saga> keep;  // the saga `write.s` points to
  };
  using save_reply = std::pair<pg::error, std::int64_t>;
  // One round of a saga's events (drive), applied to a copy of its state.
  struct event_round {
    std::deque<saga_event> events;
    std::shared_ptr<saga> next;  // the state they lead to
    const workflow_def* workflow = nullptr;
    instant t{};
    decision d;
    std::vector<step_attempt> attempts;                                       // the answers' attempts
    std::vector<std::pair<const saga_event*, engine::request_result>> acted;  // the actions, each with its result
    std::vector<prepared_call> calls;
  };

  boost::asio::awaitable<save_reply> save(saga_write w, std::shared_ptr<const saga> keep);
  boost::asio::awaitable<void> flush_saves(std::vector<save_request>& writes, std::vector<save_reply>& replies);
  std::shared_ptr<live_saga> adopt(stored_saga st);
  boost::asio::awaitable<void> drive(std::shared_ptr<live_saga> l);
  void apply_events(live_saga& l, event_round& r);
  void answer_requesters(const event_round& r, bool failed);
  static bool sendable_before_saving(const event_round& r);
  void write_lost(const std::shared_ptr<live_saga>& l, const event_round& r, const pg::error& error);
  void write_saved(const std::shared_ptr<live_saga>& l, event_round& r, std::int64_t version, bool keep);
  std::vector<prepared_call> prepare(live_saga& l, const saga& s, const decision& d, instant t) const;
  void dispatch(const std::shared_ptr<live_saga>& l, const workflow_def& w, std::vector<prepared_call> calls);
  void schedule_wake(const std::shared_ptr<live_saga>& l);
  void forget(const std::shared_ptr<live_saga>& l);
  void hand_over(const std::shared_ptr<live_saga>& l);
  void settle_action(std::int64_t id, std::optional<engine::request_result> result);
  boost::asio::awaitable<void> release(std::string saga_id);
  void note_finished(const saga& s, saga_type type, instant now);
  void count_live();

  boost::asio::any_io_executor ex_;
  saga_store& store_;
  const sharding::routing_table& routes_;
  std::vector<std::unique_ptr<shard_client>>& shards_;
  driver_options options_;
  task_group& work_;
  std::vector<workflow_engine> flows_;  // in workflows() order
  mutable std::mt19937_64 jitter_;
  std::unordered_map<std::string, std::shared_ptr<live_saga>> live_;
  std::size_t driving_ = 0;

  metrics::counter& finished_;
  metrics::counter& claimed_;
  metrics::counter& lost_;
  metrics::counter& calls_;
  metrics::counter& account_busy_;
  metrics::histogram& save_batch_;
  metrics::gauge& live_gauge_;
  std::vector<metrics::histogram*> saga_seconds_;  // by saga_type: creation to its end state
  std::vector<metrics::histogram*> call_seconds_;  // by shard: a call sent to its answer

  batching::coalescer<save_request, save_reply> saves_;
};

}  // namespace tally::orch
