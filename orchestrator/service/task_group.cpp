#include "orchestrator/service/task_group.hpp"

#include <exception>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"

namespace tally::orch {

namespace asio = boost::asio;

task_group::task_group(asio::any_io_executor ex)
    : ex_(ex), stop_(ex, asio::steady_timer::time_point::max()), joined_(ex, asio::steady_timer::time_point::max()) {}

void task_group::ended(std::exception_ptr e) {
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      log::error("a background task failed", {{"error", x.what()}});
    } catch (...) {
      log::error("a background task failed");
    }
  }
  if (--running_ == 0) joined_.cancel();
}

void task_group::stop() {
  stopped_ = true;
  stop_.cancel();
}

asio::awaitable<bool> task_group::async_wait(asio::steady_timer& timer) {
  using namespace asio::experimental::awaitable_operators;
  if (stopped_) co_return false;
  // Whichever ends first cancels the other: only this wait, nothing else of the child.
  auto first = co_await (timer.async_wait(asio::as_tuple(asio::use_awaitable)) ||
                         stop_.async_wait(asio::as_tuple(asio::use_awaitable)));
  co_return first.index() == 0 && !stopped_;
}

asio::awaitable<bool> task_group::async_sleep(std::chrono::steady_clock::duration d) {
  asio::steady_timer t(ex_, d);
  co_return co_await async_wait(t);
}

asio::awaitable<void> task_group::async_join() {
  while (running_ > 0) {
    boost::system::error_code ec;
    co_await joined_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace tally::orch
