#pragma once
// Exactly one writer per shard database. The writer holds a session-level
// advisory lock on a dedicated connection and owns the epoch it bumped when
// it took over; every write transaction checks that epoch, so an old writer
// that lost its lock can never write beside the new one. A standby polls the
// lock and takes over as soon as the writer's session ends.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/pg/connection.hpp"

namespace tally::shard {

class leadership {
 public:
  leadership(boost::asio::any_io_executor ex, std::string conninfo, std::string holder);
  // Returns the new epoch once this process is the writer. Retries through
  // database outages; logs once when it starts waiting as a standby.
  boost::asio::awaitable<std::int64_t> async_acquire(std::chrono::milliseconds poll);
  // Runs while the lock session is healthy; calls on_lost once it is not.
  boost::asio::awaitable<void> async_watch(std::chrono::milliseconds interval, std::function<void()> on_lost);
  void stop() { stopped_ = true; }

 private:
  boost::asio::any_io_executor ex_;
  std::string conninfo_;
  std::string holder_;
  pg::connection lock_conn_;
  bool stopped_ = false;
};

}  // namespace tally::shard
