#pragma once
// HTTP/1.1 server on Boost.Beast with C++20 coroutines: keep-alive, a body
// size limit per request decided from its header (before the body is read),
// header/read/idle timeouts, and graceful shutdown (stop accepting, let
// in-flight requests finish, close idle connections).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "common/contract/errors.hpp"

namespace tally::http {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using response = boost::beast::http::response<boost::beast::http::string_body>;
// Handlers run on the server's io_context. An exception escaping a handler is
// logged and answered with 500 {"error":{"code":"internal",...}}.
using handler = std::function<boost::asio::awaitable<response>(request)>;
// Takes over a connection whose request asks for a WebSocket upgrade: the
// stream (no deadline set) and the request are the callee's from then on,
// and the server forgets the connection.
using upgrade_handler = std::function<void(boost::beast::tcp_stream, request)>;
// How many body bytes a request may bring, decided from its header (method,
// target; the body is not read yet), typically by the service's route
// table; nullopt: server_options::body_limit.
using body_limit_rule = std::function<std::optional<std::size_t>(const request&)>;

struct server_options {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;                          // 0: pick a free port (see server::port())
  std::size_t body_limit = 64 * 1024;              // larger bodies → 413 payload_too_large (see body_limit_rule)
  std::chrono::milliseconds header_timeout{5000};  // whole header must arrive in time
  std::chrono::milliseconds read_timeout{10000};   // whole body must arrive in time
  std::chrono::milliseconds idle_timeout{60000};   // keep-alive connection idle
  std::chrono::milliseconds write_timeout{10000};
};

class server {
 public:
  server(boost::asio::io_context& io, server_options options, handler h, body_limit_rule body_limits = {});
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds, listens (SO_REUSEADDR) and starts the accept loop. Throws
  // boost::system::system_error when the address cannot be bound.
  void start();
  // Set before start(); without one, upgrade requests go to the handler.
  void set_upgrade_handler(upgrade_handler h);
  std::uint16_t port() const;
  // Stops accepting, closes idle keep-alive connections, waits until every
  // in-flight request has been answered (or `grace` passed), then returns.
  boost::asio::awaitable<void> async_shutdown(std::chrono::milliseconds grace = std::chrono::seconds(10));
  std::size_t open_connections() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

// A JSON response with the given status and body text, Content-Type set,
// keep-alive as in the request.
response make_json_response(const request& req, unsigned status, std::string body);
// {"error":{"code":..,"message":..,"request_id":..}} with X-Request-Id
// (echoed from the request when present, else generated).
response make_error_response(const request& req, unsigned status, std::string_view code, std::string_view message);
// The same for a code of the public contract, with its status.
response make_error_response(const request& req, contract::error_code code, std::string_view message);
std::string request_id_of(const request& req);

}  // namespace tally::http
