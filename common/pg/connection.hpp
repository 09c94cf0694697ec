#pragma once
// One asynchronous PostgreSQL connection over libpq: non-blocking connect,
// pipeline mode (many statements, one sync, one round trip), statements
// prepared automatically on first use, and the notifications of the channels
// it LISTENs on. libpq owns the socket: Asio only waits on it and never closes
// it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/pg/error.hpp"

struct pg_conn;
struct pg_result;

namespace tally::pg {

struct connect_params;

// One result of a statement, in text format.
class result {
 public:
  result() = default;
  explicit result(pg_result* r);
  int rows() const;
  int columns() const;
  bool is_null(int row, int col) const;
  std::string_view text(int row, int col) const;
  std::int64_t int64(int row, int col) const;  // throws std::runtime_error on a non-integer
  std::optional<std::int64_t> opt_int64(int row, int col) const;
  bool boolean(int row, int col) const;
  std::int64_t affected_rows() const;  // for INSERT/UPDATE/DELETE

 private:
  std::shared_ptr<pg_result> res_;
};

using param = std::optional<std::string>;  // nullopt is SQL NULL

struct statement {
  std::string_view sql;  // must outlive the call
  std::vector<param> params;
};

// A text-format array literal ({"a","b"}) for an array parameter.
std::string array_literal(std::span<const std::string> items);
std::string array_literal(std::span<const std::string_view> items);
std::string array_literal(std::span<const std::int64_t> items);
std::string array_literal(std::span<const param> items);

// A NOTIFY on a channel this connection listens on.
struct notification {
  std::string channel;
  std::string payload;
};

class connection {
 public:
  explicit connection(boost::asio::any_io_executor ex);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Connects without blocking the thread and enters pipeline mode. A
  // conninfo with several hosts is tried host by host (pg/conninfo.hpp).
  boost::asio::awaitable<error> async_connect(std::string conninfo, std::chrono::milliseconds timeout);

  // Sends every statement and one sync, then reads every result. On the
  // first failing statement the rest are skipped by the server
  // (PGRES_PIPELINE_ABORTED) and its error is returned; `out` then holds the
  // results up to the failure. A timeout or a broken socket closes the
  // connection (the outcome is unknown).
  boost::asio::awaitable<error> async_pipeline(std::span<const statement> statements, std::vector<result>& out,
                                               std::chrono::milliseconds timeout);
  boost::asio::awaitable<error> async_exec(std::string_view sql, std::vector<param> params, result& out,
                                           std::chrono::milliseconds timeout);
  boost::asio::awaitable<error> async_exec(std::string_view sql, result& out, std::chrono::milliseconds timeout);

  // Waits until notifications arrive (after a LISTEN through async_exec)
  // and returns them in the order they were sent. An error closes the
  // connection: what was notified meanwhile is lost.
  boost::asio::awaitable<error> async_notifications(std::vector<notification>& out);

  bool is_open() const;
  // Open, and nothing arrived while it sat unused: a server that ended the
  // session meanwhile (a restart, a terminated backend) left its notice or
  // the end of the stream, and the connection is no longer worth a query.
  bool is_open_and_quiet() const;
  // Inside a transaction (open, failed or with a command running): what a
  // connection must not be when it goes back to its pool.
  bool in_transaction() const;
  void close();
  // Makes the operation waiting on the socket fail as if the connection
  // were lost (it closes).
  void interrupt();

 private:
  enum class wait_for { read, write, either };
  boost::asio::awaitable<error> async_connect_to(const connect_params& params, std::chrono::milliseconds timeout);
  boost::asio::awaitable<error> async_poll_connect(std::chrono::milliseconds timeout);
  boost::asio::awaitable<std::error_code> async_wait(wait_for what);
  boost::asio::awaitable<error> async_flush();
  boost::asio::awaitable<error> async_read_results(std::size_t expected, std::vector<result>& out);
  error fail(errc code, std::string message);
  void attach_socket(bool renew = false);
  void arm_deadline(std::chrono::milliseconds timeout);
  static void on_notice(void* self, const pg_result* notice);

  boost::asio::any_io_executor ex_;
  pg_conn* conn_ = nullptr;
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  boost::asio::steady_timer deadline_;
  bool timed_out_ = false;
  // Set by on_notice when the server warns that a commit went without its
  // synchronous standby's confirmation; read when the pipeline's results end.
  bool commit_not_replicated_ = false;
  std::uint64_t deadline_generation_ = 0;
  std::uint64_t statements_named_ = 0;
  struct text_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::string, text_hash, std::equal_to<>> prepared_;  // sql → statement name
};

}  // namespace tally::pg
