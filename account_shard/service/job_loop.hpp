#pragma once
// The life of a background job on the shard's writer (the expiry job, the
// audit job): one loop of passes, each saying how long to wait before the
// next, woken early or stopped through one timer, and a wait until the
// loop has ended.
#include <chrono>
#include <functional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace tally::shard {

class job_loop {
 public:
  // One pass; returns how long to wait before the next (zero: none).
  using pass_fn = std::function<boost::asio::awaitable<std::chrono::milliseconds>()>;

  explicit job_loop(boost::asio::any_io_executor ex);
  void start(pass_fn pass);
  // The wait under way, or the next one, ends at once.
  void wake();
  // Asks the loop to stop: it ends after the pass under way.
  void stop();
  bool stopped() const { return stopped_; }
  // Returns once the loop has ended (after stop()).
  boost::asio::awaitable<void> async_stopped();

 private:
  boost::asio::awaitable<void> run(pass_fn pass);

  boost::asio::steady_timer timer_;
  boost::asio::steady_timer ended_;  // cancelled when run() returns
  bool stopped_ = false;
  bool running_ = false;
  bool woken_ = false;
};

}  // namespace tally::shard
