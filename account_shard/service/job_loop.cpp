#include "account_shard/service/job_loop.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tally::shard {

namespace asio = boost::asio;

job_loop::job_loop(asio::any_io_executor ex) : timer_(ex), ended_(ex, asio::steady_timer::time_point::max()) {}

void job_loop::start(pass_fn pass) {
  running_ = true;
  asio::co_spawn(
      timer_.get_executor(), [this, pass = std::move(pass)]() mutable { return run(std::move(pass)); }, asio::detached);
}

void job_loop::wake() {
  woken_ = true;
  timer_.cancel();
}

void job_loop::stop() {
  stopped_ = true;
  timer_.cancel();
}

asio::awaitable<void> job_loop::async_stopped() {
  while (running_) {
    boost::system::error_code ec;
    co_await ended_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> job_loop::run(pass_fn pass) {
  while (!stopped_) {
    woken_ = false;
    const auto wait = co_await pass();
    if (stopped_) break;
    if (woken_ || wait.count() <= 0) continue;  // woken during the pass, or more to do at once
    timer_.expires_after(wait);
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  running_ = false;
  ended_.cancel();
}

}  // namespace tally::shard
