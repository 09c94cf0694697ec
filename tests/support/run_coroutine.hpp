#pragma once
// Runs one coroutine to completion on a fresh io_context (for tests of
// asynchronous code); rethrows what it threw.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
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

}  // namespace tally::test
