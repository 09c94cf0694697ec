#pragma once
// A pool of connections to one database, for use on one io_context thread.
// Broken connections are dropped and replaced on the next acquire, so the
// pool recovers by itself after the server restarts: an idle connection the
// server ended meanwhile is found before it is handed out, and the first
// query after a restart goes on a fresh one.
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/pg/connection.hpp"

namespace tally::pg {

// The session of a connection that writes batches: statements that join a
// table's keys against unnest() of a batch's arrays. Left to itself,
// PostgreSQL may switch such a prepared statement to a generic plan made
// while the tables were small (a scan) and keep it as they grow:
// throughput then decays within minutes. These sessions always plan with
// the batch's actual arrays instead. The working set is in memory, so a
// random page read costs about what a sequential one does; with the
// default cost of 4 the planner hash-joins a batch of 50 keys against a
// scan of every row.
inline constexpr std::string_view batch_writer_session_sql =
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', false), set_config('random_page_cost', '1.1', false)";

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
