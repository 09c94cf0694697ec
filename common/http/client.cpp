#include "common/http/client.hpp"

#include <optional>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "common/asio/idle_socket.hpp"
#include "common/http/beast_io.hpp"

namespace tally::http {

struct client::impl {
  impl(asio::any_io_executor ex, std::string host, std::uint16_t port)
      : executor_(std::move(ex)),
        host_(std::move(host)),
        port_(port),
        host_header_(host_ + ":" + std::to_string(port)) {}

  // A request goes on a fresh connection rather than on a kept-alive one
  // the server has closed meanwhile. A close racing with our send still
  // fails the request: it is never re-sent, because the server may have
  // acted on it.
  bool idle_connection_usable() {
    return stream_ && stream_->socket().is_open() && buffer_.size() == 0 &&
           net::idle_socket_usable(stream_->socket().native_handle());
  }

  // Only called while no operation is pending on the stream.
  void reset() {
    stream_.reset();
    buffer_.clear();
  }

  asio::any_io_executor executor_;
  std::string host_;
  std::uint16_t port_;
  std::string host_header_;
  std::optional<beast::tcp_stream> stream_;  // empty: not connected
  beast::flat_buffer buffer_;
};

client::client(asio::any_io_executor ex, std::string host, std::uint16_t port)
    : impl_(std::make_unique<impl>(std::move(ex), std::move(host), port)) {}

client::~client() = default;

asio::awaitable<client_response> client::async_request(request req, std::chrono::milliseconds timeout) {
  impl& self = *impl_;
  client_response out;
  if (req.find(bhttp::field::host) == req.end()) req.set(bhttp::field::host, self.host_header_);
  req.keep_alive(true);
  req.prepare_payload();

  const auto fail = [&](error_code ec) {
    self.reset();
    out.error = ec == beast::error::timeout ? make_error_code(asio::error::timed_out) : ec;
  };

  if (!self.idle_connection_usable()) {
    self.reset();
    error_code ec;
    const auto address = asio::ip::make_address(self.host_, ec);
    if (ec) {
      out.error = ec;
      co_return out;
    }
    self.stream_.emplace(self.executor_);
    // One deadline for connect, write and read: tcp_stream keeps it until reset.
    self.stream_->expires_after(timeout);
    const tcp::endpoint endpoint(address, self.port_);
    auto [connect_ec] = co_await self.stream_->async_connect(endpoint, use_tuple);
    if (connect_ec) {
      fail(connect_ec);
      co_return out;
    }
    self.stream_->socket().set_option(tcp::no_delay(true), ec);
  } else {
    self.stream_->expires_after(timeout);
  }

  auto& stream = *self.stream_;
  out.sent = true;
  auto [write_ec, write_n] = co_await bhttp::async_write(stream, req, use_tuple);
  if (write_ec) {
    fail(write_ec);
    co_return out;
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.skip(req.method() == bhttp::verb::head);
  auto [read_ec, read_n] = co_await bhttp::async_read(stream, self.buffer_, parser, use_tuple);
  if (read_ec) {
    fail(read_ec);
    co_return out;
  }
  stream.expires_never();
  out.message = parser.release();
  if (!out.message.keep_alive()) self.reset();
  co_return out;
}

asio::awaitable<client_response> client::async_json(bhttp::verb method, std::string target, std::string body,
                                                    std::chrono::milliseconds timeout, std::string bearer_token) {
  request req(method, target, 11);
  req.set(bhttp::field::content_type, "application/json");
  if (!bearer_token.empty()) req.set(bhttp::field::authorization, "Bearer " + bearer_token);
  req.body() = std::move(body);
  co_return co_await async_request(std::move(req), timeout);
}

void client::close() {
  // Closing (not destroying) the stream keeps a pending request safe: it
  // completes with an error and resets the connection itself.
  if (impl_->stream_) impl_->stream_->close();
}

}  // namespace tally::http
