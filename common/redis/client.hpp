#pragma once
// A Redis client for one io_context thread: commands from many callers are
// coalesced and pipelined over a few connections, reconnected on demand.
// While Redis is unreachable, commands fail at once (for `retry_after`
// after each failed connect) instead of each waiting for a connect timeout,
// so callers with a fallback take it without delay.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/redis/connection.hpp"

namespace tally::redis {

struct client_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::size_t connections = 2;
  std::size_t max_batch = 256;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds timeout{500};  // per pipelined round trip
  std::chrono::milliseconds retry_after{500};
};

// A Lua script run with EVALSHA (loaded by EVAL the first time a server
// does not know it).
struct script {
  explicit script(std::string source);
  std::string source;
  std::string sha1;
};

class client {
 public:
  client(boost::asio::any_io_executor ex, client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  boost::asio::awaitable<reply> async_exec(command c);
  boost::asio::awaitable<reply> async_eval(const script& s, std::vector<std::string> keys,
                                           std::vector<std::string> args);
  // Whether the last round trip reached Redis.
  bool reachable() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace tally::redis
