#pragma once
// One Redis connection: an Asio socket for the bytes, hiredis for the
// protocol (its command formatter and its sans-I/O reply reader). Commands
// are pipelined: a round trip writes every command of a batch, then reads
// one reply per command, in order.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

namespace tally::redis {

// A reply, converted from hiredis' tree. Errors from the server ("-ERR ...")
// are values of type `error`, not transport errors.
struct value {
  enum class kind { nil, integer, string, status, error, array };
  kind type = kind::nil;
  std::int64_t integer = 0;
  std::string text;  // string, status or error
  std::vector<value> elements;

  bool is_error() const { return type == kind::error; }
};

using command = std::vector<std::string>;  // the command name, then its arguments

// make_command("GET", key): a command without a braced list, which GCC 12
// cannot compile inside a co_await operand.
template <class... Args>
command make_command(Args&&... args) {
  command c;
  c.reserve(sizeof...(args));
  (c.emplace_back(std::forward<Args>(args)), ...);
  return c;
}

struct reply {
  boost::system::error_code error;  // transport: refused, timed out, reset, closed
  value v;
  bool ok() const { return !error && !v.is_error(); }
};

class connection {
 public:
  explicit connection(boost::asio::any_io_executor ex);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // `host` is an IP address (no name lookups on the request path).
  boost::asio::awaitable<boost::system::error_code> async_connect(const std::string& host, std::uint16_t port,
                                                                  std::chrono::milliseconds timeout);
  // Sends every command and reads every reply within `timeout`. On a
  // transport error the connection is closed and every reply carries it.
  boost::asio::awaitable<boost::system::error_code> async_roundtrip(std::span<const command> commands,
                                                                    std::vector<reply>& out,
                                                                    std::chrono::milliseconds timeout);
  bool is_open() const;
  void close();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tally::redis
