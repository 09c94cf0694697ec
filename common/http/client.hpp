#pragma once
// HTTP/1.1 client on Boost.Beast: one keep-alive connection to host:port,
// reconnected on demand. Not thread-safe; one request at a time per client.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include "common/http/server.hpp"

namespace tally::http {

struct client_response {
  boost::system::error_code error;  // transport error (timeout → boost::asio::error::timed_out)
  response message;                 // valid when !error
  // Whether any of the request may have reached the server: false when the
  // connection could not be made, so the server cannot have acted on it.
  bool sent = false;
};

class client {
 public:
  client(boost::asio::any_io_executor ex, std::string host, std::uint16_t port);
  ~client();
  // Sends `req` (Host, Content-Length and keep-alive set for you) and reads
  // the response, all within `timeout`. On any transport error the
  // connection is closed and the next request reconnects. A request is never
  // re-sent by the client itself: the caller decides (keys make it safe).
  boost::asio::awaitable<client_response> async_request(request req, std::chrono::milliseconds timeout);
  // Convenience: method + target + JSON body (may be empty) + extra header.
  boost::asio::awaitable<client_response> async_json(boost::beast::http::verb method, std::string target,
                                                     std::string body, std::chrono::milliseconds timeout,
                                                     std::string bearer_token = "");
  void close();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tally::http
