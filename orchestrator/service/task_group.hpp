#pragma once
// The coroutines one owner starts and must see end before it goes. Each
// child is counted until it returns; stop() ends every wait a child makes
// through the group (a sleep, or a timer raced against the stop in a
// parallel group) at once, and async_join() waits for the last child.
// Store and shard calls are not interrupted (their own timeouts bound them):
// a child sees the stop at its next wait. So nothing a child touches may go
// before async_join() returned, and no child needs a liveness flag.
#include <chrono>
#include <cstddef>
#include <exception>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>

namespace tally::orch {

class task_group {
 public:
  explicit task_group(boost::asio::any_io_executor ex);
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  // Runs `child()` (an awaitable<void>) until it returns; an exception it
  // throws is logged. The function object lives as long as the coroutine,
  // so a coroutine lambda's captures stay valid.
  template <typename F>
  void spawn(F child) {
    ++running_;
    boost::asio::co_spawn(ex_, std::move(child), [this](std::exception_ptr e) { ended(e); });
  }
  // Ends every wait of the children; later waits end at once.
  void stop();
  bool stopped() const { return stopped_; }
  std::size_t running() const { return running_; }

  // Sleeps for `d`; false when the group stopped first.
  boost::asio::awaitable<bool> async_sleep(std::chrono::steady_clock::duration d);
  // Waits until `timer` expires or is cancelled; false when the group
  // stopped first.
  boost::asio::awaitable<bool> async_wait(boost::asio::steady_timer& timer);
  // Returns once no child runs.
  boost::asio::awaitable<void> async_join();

 private:
  void ended(std::exception_ptr e);

  boost::asio::any_io_executor ex_;
  boost::asio::steady_timer stop_;    // never expires: cancelled by stop()
  boost::asio::steady_timer joined_;  // never expires: cancelled when the last child ends
  std::size_t running_ = 0;
  bool stopped_ = false;
};

}  // namespace tally::orch
