#pragma once
// A connection of its own that LISTENs on some channels and hands every
// notification to a callback until stopped. When the connection is lost it
// connects again (pausing between tries) and says so once it listens again:
// whatever was notified meanwhile is lost, so callers re-check what they
// wait for.
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/pg/connection.hpp"

namespace tally::pg {

struct listener_handlers {
  std::function<void(std::string_view channel, std::string_view payload)> notified;
  // After every LISTEN, the first included: notifications may have been missed.
  std::function<void()> listening;
};

class listener {
 public:
  listener(boost::asio::any_io_executor ex, std::string conninfo, std::vector<std::string> channels,
           listener_handlers handlers, std::chrono::milliseconds retry = std::chrono::seconds(1));
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  // Listens until stop(); returns after it.
  boost::asio::awaitable<void> async_run();
  void stop();

 private:
  boost::asio::awaitable<error> async_listen();

  std::string conninfo_;
  std::vector<std::string> channels_;
  listener_handlers handlers_;
  std::chrono::milliseconds retry_;
  connection conn_;
  boost::asio::steady_timer pause_;
  bool stopped_ = false;
};

}  // namespace tally::pg
