#pragma once
// A pool of connections to one database, for use on one io_context thread.
// Broken connections are dropped and replaced on the next acquire, so the
// pool recovers by itself after the server restarts.
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/pg/connection.hpp"

namespace tally::pg {

struct pool_options {
  std::string conninfo;
  std::size_t max_size = 8;
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds acquire_timeout{3000};
  std::string session_sql;  // run once on every new connection (e.g. SET ...), when not empty
};

class pool;

// A connection borrowed from a pool; returned when destroyed.
class lease {
 public:
  lease() = default;
  lease(pool* owner, std::unique_ptr<connection> c) : owner_(owner), conn_(std::move(c)) {}
  lease(lease&&) noexcept = default;
  lease& operator=(lease&&) noexcept;
  ~lease();
  connection& operator*() { return *conn_; }
  connection* operator->() { return conn_.get(); }
  explicit operator bool() const { return conn_ != nullptr; }

 private:
  pool* owner_ = nullptr;
  std::unique_ptr<connection> conn_;
};

class pool {
 public:
  pool(boost::asio::any_io_executor ex, pool_options options);
  ~pool();
  // A ready connection, or an error (connection_failed, pool_exhausted).
  boost::asio::awaitable<error> async_acquire(lease& out);
  std::size_t size() const { return open_; }
  std::size_t idle() const { return idle_.size(); }
  const pool_options& options() const { return options_; }

 private:
  friend class lease;
  void give_back(std::unique_ptr<connection> c);

  boost::asio::any_io_executor ex_;
  pool_options options_;
  std::vector<std::unique_ptr<connection>> idle_;
  std::size_t open_ = 0;  // idle + leased + connecting
  std::deque<boost::asio::steady_timer*> waiters_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tally::pg
