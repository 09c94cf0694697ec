#pragma once
// Runs one coroutine to completion on a fresh io_context (for tests of
// asynchronous code); rethrows what it threw. Polls a condition with a
// deadline from inside one.
#include <chrono>
#include <functional>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

namespace tally::test {

// `body` takes the io_context and returns an awaitable<void>.
template <typename F>
void run_coroutine(F body) {
  boost::asio::io_context io;
  auto task = [&]() -> boost::asio::awaitable<void> { co_await body(io); };
  auto done = boost::asio::co_spawn(io, task, boost::asio::use_future);
  io.run();
  done.get();
}

// Polls `ready` every 10 ms until it holds (true) or `limit` has passed (false).
inline boost::asio::awaitable<bool> within(boost::asio::io_context& io, std::chrono::milliseconds limit,
                                           std::function<bool()> ready) {
  boost::asio::steady_timer pause(io);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    pause.expires_after(std::chrono::milliseconds(10));
    co_await pause.async_wait(boost::asio::use_awaitable);
  }
  co_return true;
}

}  // namespace tally::test
