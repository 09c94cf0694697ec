#include "common/http/server.hpp"

#include <algorithm>
#include <exception>
#include <list>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/none.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <nlohmann/json.hpp>

#include "common/http/beast_io.hpp"
#include "common/log/log.hpp"

namespace tally::http {
namespace {

constexpr std::string_view request_id_header = "X-Request-Id";
constexpr std::size_t max_request_id_length = 128;
constexpr std::size_t idle_read_size = 4096;
// After an error response the peer may still be sending the rest of its
// request. Closing with unread input makes the kernel send a reset, which can
// destroy our response before the peer reads it, so read and drop input for a
// bounded moment first.
constexpr std::chrono::milliseconds linger_time{500};
constexpr std::size_t linger_bytes = 1024 * 1024;
// Accept errors such as EMFILE repeat immediately; pause instead of spinning.
constexpr std::chrono::milliseconds accept_backoff{50};
constexpr std::string_view continue_response = "HTTP/1.1 100 Continue\r\n\r\n";

bool is_usable_request_id(std::string_view id) {
  return !id.empty() && id.size() <= max_request_id_length &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string generate_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  constexpr std::string_view digits = "0123456789abcdef";
  std::string id = "req_";
  auto bits = rng();
  for (int i = 0; i < 16; ++i, bits >>= 4) id.push_back(digits[bits & 0xf]);
  return id;
}

// Parse failures that deserve an answer before closing; transport failures
// (reset, EOF, timeout) just close.
struct parse_failure {
  unsigned status;
  std::string_view code;
  std::string_view message;
};

std::optional<parse_failure> classify_read_error(const error_code& ec) {
  if (ec == bhttp::error::body_limit) return parse_failure{413, "payload_too_large", "request body too large"};
  if (ec == bhttp::error::header_limit) return parse_failure{431, "headers_too_large", "request headers too large"};
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) return std::nullopt;
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category()) {
    return parse_failure{400, "invalid_request", "malformed request"};
  }
  return std::nullopt;
}

auto log_coroutine_failure(std::string_view what) {
  return [what](const std::exception_ptr& failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      log::error(what, {{"error", e.what()}});
    } catch (...) {
      log::error(what, {{"error", "unknown exception"}});
    }
  };
}

struct connection {
  explicit connection(tcp::socket socket) : stream_(std::move(socket)) {}

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;  // reused across requests, also holds pipelined bytes
  bool idle_ = true;           // waiting for the first byte of the next request
  // Copies kept for the 500 path, after the request itself moved into the
  // handler; assign() reuses their capacity, so no allocation per request.
  std::string target_;
  std::string request_id_;
};

void close_gracefully(connection& conn) {
  error_code ignored;
  conn.stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  conn.stream_.close();
}

}  // namespace

struct server::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& io, server_options options, handler h, body_limit_rule body_limits)
      : io_(io),
        options_(std::move(options)),
        handler_(std::move(h)),
        body_limits_(std::move(body_limits)),
        acceptor_(io),
        drained_(io) {}

  // Keeps `connections_` exact however the connection coroutine ends.
  class registration {
   public:
    registration(impl& owner, connection& conn) : owner_(owner) {
      owner_.connections_.push_front(&conn);
      pos_ = owner_.connections_.begin();
    }
    ~registration() {
      owner_.connections_.erase(pos_);
      if (owner_.shutting_down_ && owner_.connections_.empty()) owner_.drained_.cancel();
    }
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;

   private:
    impl& owner_;
    std::list<connection*>::iterator pos_;
  };

  static asio::awaitable<void> accept_loop(std::shared_ptr<impl> self);
  static asio::awaitable<void> serve(std::shared_ptr<impl> self, tcp::socket socket);
  asio::awaitable<response> invoke_handler(connection& conn, request req);
  asio::awaitable<void> answer_and_close(connection& conn, response res);

  std::size_t body_limit_of(const request& header) const {
    if (!body_limits_) return options_.body_limit;
    return body_limits_(header).value_or(options_.body_limit);
  }

  void close_connections(bool idle_only) {
    for (connection* conn : connections_) {
      if (!idle_only || conn->idle_) conn->stream_.close();
    }
  }

  asio::io_context& io_;
  const server_options options_;
  const handler handler_;
  const body_limit_rule body_limits_;
  upgrade_handler upgrade_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::list<connection*> connections_;
  bool shutting_down_ = false;
  // Used as a condition variable: cancelled when the last connection leaves
  // during shutdown, expires when the grace period is over.
  asio::steady_timer drained_;
};

asio::awaitable<void> server::impl::accept_loop(std::shared_ptr<impl> self) {
  for (;;) {
    auto [ec, socket] = co_await self->acceptor_.async_accept(use_tuple);
    if (self->shutting_down_ || !self->acceptor_.is_open()) co_return;
    if (ec) {
      log::warn("http accept failed", {{"error", ec.message()}});
      asio::steady_timer pause(self->io_, accept_backoff);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = serve(self, std::move(socket));
    asio::co_spawn(self->io_, std::move(session), log_coroutine_failure("http connection failed"));
  }
}

asio::awaitable<void> server::impl::serve(std::shared_ptr<impl> self, tcp::socket socket) {
  connection conn(std::move(socket));
  const registration tracked(*self, conn);
  const server_options& options = self->options_;
  auto& stream = conn.stream_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser;

  for (;;) {
    if (conn.buffer_.size() == 0) {
      // Between requests only the idle timeout applies; the header timeout
      // starts with the first byte. Shutdown closes connections parked here.
      if (self->shutting_down_) co_return;
      conn.idle_ = true;
      stream.expires_after(options.idle_timeout);
      auto [ec, n] = co_await stream.async_read_some(conn.buffer_.prepare(idle_read_size), use_tuple);
      if (ec) co_return;
      conn.buffer_.commit(n);
    }
    conn.idle_ = false;

    parser.emplace();
    // The limit depends on the route, known once the header is in: Beast
    // would refuse a Content-Length over a limit set now, so none is set.
    parser->body_limit(boost::none);
    // tcp_stream keeps one deadline for every read until it is reset, so a
    // client trickling header bytes cannot extend it.
    stream.expires_after(options.header_timeout);
    auto [read_ec, header_n] = co_await bhttp::async_read_header(stream, conn.buffer_, *parser, use_tuple);
    if (!read_ec && !parser->is_done()) {
      const auto limit = self->body_limit_of(parser->get());
      // A declared length over the limit is refused before any of the body
      // is read (and before 100 Continue); a chunked body when it gets there.
      if (const auto length = parser->content_length(); length && *length > limit) {
        read_ec = bhttp::error::body_limit;
      } else {
        parser->body_limit(limit);
      }
    }
    if (!read_ec && !parser->is_done()) {
      if (beast::iequals(parser->get()[bhttp::field::expect], "100-continue")) {
        stream.expires_after(options.write_timeout);
        auto [ec, n] = co_await asio::async_write(stream, asio::buffer(continue_response), use_tuple);
        if (ec) co_return;
      }
      stream.expires_after(options.read_timeout);
      auto [body_ec, body_n] = co_await bhttp::async_read(stream, conn.buffer_, *parser, use_tuple);
      read_ec = body_ec;
    }
    if (read_ec) {
      if (auto failure = classify_read_error(read_ec)) {
        auto answer = make_error_response(parser->get(), failure->status, failure->code, failure->message);
        co_await self->answer_and_close(conn, std::move(answer));
      }
      co_return;
    }

    request req = parser->release();
    if (self->upgrade_ && beast::websocket::is_upgrade(req) && !self->shutting_down_) {
      stream.expires_never();
      self->upgrade_(std::move(stream), std::move(req));
      co_return;
    }
    const bool client_keeps_alive = req.keep_alive();
    response res = co_await self->invoke_handler(conn, std::move(req));
    const bool keep_alive = client_keeps_alive && res.keep_alive() && !self->shutting_down_;
    res.keep_alive(keep_alive);
    // Handlers may build responses by hand; make Content-Length match the body.
    res.prepare_payload();

    stream.expires_after(options.write_timeout);
    auto [write_ec, write_n] = co_await bhttp::async_write(stream, res, use_tuple);
    if (write_ec) co_return;
    if (!keep_alive) {
      close_gracefully(conn);
      co_return;
    }
  }
}

asio::awaitable<response> server::impl::invoke_handler(connection& conn, request req) {
  conn.target_.assign(req.target());
  conn.request_id_.assign(req[request_id_header]);
  const auto method = req.method();
  const auto version = req.version();
  const bool keep_alive = req.keep_alive();

  std::string failure;
  try {
    co_return co_await handler_(std::move(req));
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }

  request original(method, conn.target_, version);
  if (!conn.request_id_.empty()) original.set(request_id_header, conn.request_id_);
  original.keep_alive(keep_alive);
  response res = make_error_response(original, contract::error_code::internal, "internal error");
  log::error("http handler failed", {{"request_id", res[request_id_header]},
                                     {"method", bhttp::to_string(method)},
                                     {"target", conn.target_},
                                     {"error", failure}});
  co_return res;
}

asio::awaitable<void> server::impl::answer_and_close(connection& conn, response res) {
  auto& stream = conn.stream_;
  res.keep_alive(false);
  stream.expires_after(options_.write_timeout);
  auto [write_ec, write_n] = co_await bhttp::async_write(stream, res, use_tuple);
  if (!write_ec) {
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.expires_after(linger_time);
    for (std::size_t dropped = 0; dropped < linger_bytes;) {
      conn.buffer_.clear();
      auto [ec, n] = co_await stream.async_read_some(conn.buffer_.prepare(idle_read_size), use_tuple);
      if (ec) break;
      dropped += n;
    }
  }
  stream.close();
}

server::server(asio::io_context& io, server_options options, handler h, body_limit_rule body_limits)
    : impl_(std::make_shared<impl>(io, std::move(options), std::move(h), std::move(body_limits))) {}

server::~server() {
  // Connection coroutines share ownership of impl_ and may outlive this
  // object; closing everything makes them finish promptly.
  impl_->shutting_down_ = true;
  error_code ignored;
  impl_->acceptor_.close(ignored);
  impl_->close_connections(false);
}

void server::start() {
  const tcp::endpoint endpoint(asio::ip::make_address(impl_->options_.address), impl_->options_.port);
  auto& acceptor = impl_->acceptor_;
  acceptor.open(endpoint.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  impl_->port_ = acceptor.local_endpoint().port();
  auto loop = impl::accept_loop(impl_);
  asio::co_spawn(impl_->io_, std::move(loop), log_coroutine_failure("http accept loop failed"));
}

void server::set_upgrade_handler(upgrade_handler h) { impl_->upgrade_ = std::move(h); }

std::uint16_t server::port() const { return impl_->port_; }

asio::awaitable<void> server::async_shutdown(std::chrono::milliseconds grace) {
  const auto self = impl_;
  self->shutting_down_ = true;
  error_code ignored;
  self->acceptor_.close(ignored);
  // In-flight requests notice shutting_down_ and answer with Connection: close.
  self->close_connections(true);
  if (!self->connections_.empty()) {
    self->drained_.expires_after(grace);
    co_await self->drained_.async_wait(use_tuple);
  }
  if (!self->connections_.empty()) {
    log::warn("http shutdown grace expired, closing connections", {{"open_connections", self->connections_.size()}});
    self->close_connections(false);
  }
}

std::size_t server::open_connections() const { return impl_->connections_.size(); }

response make_json_response(const request& req, unsigned status, std::string body) {
  response res;
  res.result(status);
  res.version(req.version());
  res.set(bhttp::field::content_type, "application/json");
  if (const auto id = req[request_id_header]; is_usable_request_id(id)) res.set(request_id_header, id);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

response make_error_response(const request& req, unsigned status, std::string_view code, std::string_view message) {
  const std::string id = request_id_of(req);
  const nlohmann::json body = {{"error", {{"code", code}, {"message", message}, {"request_id", id}}}};
  response res = make_json_response(req, status, body.dump());
  res.set(request_id_header, id);
  return res;
}

response make_error_response(const request& req, contract::error_code code, std::string_view message) {
  return make_error_response(req, contract::http_status(code), contract::to_string(code), message);
}

std::string request_id_of(const request& req) {
  const auto id = req[request_id_header];
  return is_usable_request_id(id) ? std::string(id) : generate_request_id();
}

}  // namespace tally::http
