#pragma once
// Actions on sagas this instance does not drive. The action is recorded in
// the store for whichever instance holds the saga, or claims it next (the
// store's NOTIFY wakes their claimers), and the requester waits for the
// holder's NOTIFY that the action is settled, then reads its result. The
// result is also read at once, every `recheck` and at the deadline: a
// notification is lost when the listening connection drops.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "orchestrator/store/saga_store.hpp"

namespace tally::orch {

// The action id a settled notification carries, if it is one.
std::optional<std::int64_t> settled_action_id(std::string_view payload);

class remote_actions {
 public:
  remote_actions(boost::asio::any_io_executor ex, saga_store& store, std::chrono::milliseconds recheck);

  struct outcome {
    pg::error error;                               // the action could not be recorded
    std::optional<engine::request_result> result;  // none: not settled in time
  };
  // Records the action and waits up to `timeout` for its result.
  boost::asio::awaitable<outcome> async_request(std::string saga_id, saga_action action,
                                                std::chrono::milliseconds timeout);
  // A notification on action_settled_channel.
  void settled(std::string_view payload);
  // Notifications may have been missed: every requester reads its result.
  void recheck_all();

 private:
  boost::asio::any_io_executor ex_;
  saga_store& store_;
  std::chrono::milliseconds recheck_;
  // A requester's timer, and whether a notification (or a recheck) came
  // while it was not waiting on it: then it reads again before it waits.
  struct waiter {
    boost::asio::steady_timer* bell = nullptr;
    bool rung = false;
  };
  std::unordered_map<std::int64_t, waiter> waiting_;  // by action id
  void ring(waiter& w);
};

}  // namespace tally::orch
