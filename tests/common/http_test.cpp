#include <array>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http/client.hpp"
#include "common/http/server.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace tally::http;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> sleep_for(milliseconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(use_tuple);
}

asio::awaitable<error_code> try_connect(tcp::socket& socket, std::uint16_t port) {
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
  auto [ec] = co_await socket.async_connect(endpoint, use_tuple);
  co_return ec;
}

asio::awaitable<void> send_raw(tcp::socket& socket, std::string data) {
  co_await asio::async_write(socket, asio::buffer(data), asio::use_awaitable);
}

// Everything the peer sends until it closes (EOF or reset).
asio::awaitable<std::string> read_until_closed(tcp::socket& socket) {
  std::string data;
  std::array<char, 4096> chunk{};
  for (;;) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
    data.append(chunk.data(), n);
    if (ec) co_return data;
  }
}

// What the peer sends until `marker` appears (or it closes).
asio::awaitable<std::string> read_until_contains(tcp::socket& socket, std::string marker) {
  std::string data;
  std::array<char, 4096> chunk{};
  while (data.find(marker) == std::string::npos) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
    data.append(chunk.data(), n);
    if (ec) break;
  }
  co_return data;
}

// A slowloris client: one header line at a time, forever.
asio::awaitable<void> trickle_header_lines(tcp::socket& socket) {
  for (;;) {
    co_await sleep_for(50ms);
    const std::string line = "X-Slow: 1\r\n";
    auto [ec, n] = co_await asio::async_write(socket, asio::buffer(line), use_tuple);
    if (ec) co_return;
  }
}

nlohmann::json error_of(const response& res) { return nlohmann::json::parse(res.body()).at("error"); }

class http_test : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) {
      run(server_->async_shutdown(500ms));
      server_.reset();
    }
  }

  void start_server(server_options options = {}, body_limit_rule body_limits = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<server>(io_, options, routes(), std::move(body_limits));
    server_->start();
  }

  std::uint16_t port() const { return server_->port(); }

  // /slow awaits slow_delay_, /throw throws, /missing answers 404, anything
  // else echoes the request as JSON.
  handler routes() {
    return [this](request req) -> asio::awaitable<response> {
      if (req.target() == "/slow") {
        slow_started_ = true;
        co_await sleep_for(slow_delay_);
      } else if (req.target() == "/throw") {
        throw std::runtime_error("db password is hunter2");
      } else if (req.target() == "/missing") {
        co_return make_error_response(req, 404, "not_found", "no such thing");
      }
      seen_connections_.push_back(server_->open_connections());
      const nlohmann::json echo = {{"method", std::string(req.method_string())},
                                   {"target", std::string(req.target())},
                                   {"body", req.body()},
                                   {"authorization", std::string(req[bhttp::field::authorization])}};
      co_return make_json_response(req, 200, echo.dump());
    };
  }

  // Runs the io_context until `done()` or the time limit; false on timeout.
  bool wait_until(const std::function<bool()>& done, milliseconds limit = 5s) {
    const auto deadline = steady_clock::now() + limit;
    while (!done()) {
      if (steady_clock::now() >= deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(5ms);
    }
    return true;
  }

  template <class T, class F>
  void spawn(asio::awaitable<T> op, F on_done) {
    asio::co_spawn(io_, std::move(op), [on_done](const std::exception_ptr& failure, T value) {
      if (failure) std::rethrow_exception(failure);
      on_done(std::move(value));
    });
  }

  template <class F>
  void spawn(asio::awaitable<void> op, F on_done) {
    asio::co_spawn(io_, std::move(op), [on_done](const std::exception_ptr& failure) {
      if (failure) std::rethrow_exception(failure);
      on_done();
    });
  }

  template <class T>
  T run(asio::awaitable<T> op, milliseconds limit = 5s) {
    std::optional<T> result;
    spawn(std::move(op), [&result](T value) { result.emplace(std::move(value)); });
    if (!wait_until([&] { return result.has_value(); }, limit)) throw std::runtime_error("operation timed out");
    return std::move(*result);
  }

  void run(asio::awaitable<void> op, milliseconds limit = 5s) {
    bool done = false;
    spawn(std::move(op), [&done] { done = true; });
    if (!wait_until([&] { return done; }, limit)) throw std::runtime_error("operation timed out");
  }

  client_response get(client& c, std::string target, milliseconds timeout = 5s) {
    return run(c.async_json(bhttp::verb::get, std::move(target), "", timeout));
  }

  // A GET of `target` that carries `request_id` as its X-Request-Id.
  auto get_traced(client& c, std::string target, const std::string& request_id) {
    request req(bhttp::verb::get, std::move(target), 11);
    req.set("X-Request-Id", request_id);
    return run(c.async_request(std::move(req), 5s));
  }

  // A server with one of its timeouts, `timeout`, at 200 ms.
  void start_server_timing_out(milliseconds server_options::*timeout) {
    server_options options;
    options.*timeout = 200ms;
    start_server(options);
  }

  // The server closed a connection on its 200 ms timeout, counted from
  // `since`, and holds no connection now.
  void expect_closed_on_timeout(steady_clock::time_point since) {
    const auto elapsed = steady_clock::now() - since;
    EXPECT_GE(elapsed, 150ms);
    EXPECT_LT(elapsed, 2s);
    EXPECT_TRUE(wait_until([&] { return server_->open_connections() == 0; }));
  }

  asio::io_context io_;
  std::unique_ptr<server> server_;
  bool slow_started_ = false;
  milliseconds slow_delay_ = 300ms;
  std::vector<std::size_t> seen_connections_;
};

TEST_F(http_test, request_response_round_trip) {
  start_server();
  client c(io_.get_executor(), "127.0.0.1", port());
  const auto res = run(c.async_json(bhttp::verb::post, "/v1/echo", R"({"a":1})", 5s, "t0k"));
  ASSERT_FALSE(res.error) << res.error.message();
  EXPECT_EQ(res.message.result_int(), 200u);
  EXPECT_EQ(res.message[bhttp::field::content_type], "application/json");
  const auto echo = nlohmann::json::parse(res.message.body());
  EXPECT_EQ(echo.at("method"), "POST");
  EXPECT_EQ(echo.at("target"), "/v1/echo");
  EXPECT_EQ(echo.at("body"), R"({"a":1})");
  EXPECT_EQ(echo.at("authorization"), "Bearer t0k");
}

TEST_F(http_test, keep_alive_serves_two_requests_over_one_connection) {
  start_server();
  client c(io_.get_executor(), "127.0.0.1", port());
  ASSERT_FALSE(get(c, "/one").error);
  ASSERT_FALSE(get(c, "/two").error);
  EXPECT_EQ(seen_connections_, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(http_test, pipelined_requests_are_answered_in_order) {
  start_server();
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket,
               "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string data = run(read_until_closed(socket));
  const auto first = data.find(R"("target":"/a")");
  const auto second = data.find(R"("target":"/b")");
  ASSERT_NE(first, std::string::npos) << data;
  ASSERT_NE(second, std::string::npos) << data;
  EXPECT_LT(first, second);
  EXPECT_NE(data.find("Connection: close"), std::string::npos);
}

TEST_F(http_test, body_over_limit_gets_413_and_close) {
  server_options options;
  options.body_limit = 1024;
  start_server(options);
  client c(io_.get_executor(), "127.0.0.1", port());
  const auto res = run(c.async_json(bhttp::verb::post, "/v1/echo", std::string(4096, 'x'), 5s));
  ASSERT_FALSE(res.error) << res.error.message();
  EXPECT_EQ(res.message.result_int(), 413u);
  EXPECT_FALSE(res.message.keep_alive());
  const auto error = error_of(res.message);
  EXPECT_EQ(error.at("code"), "payload_too_large");
  EXPECT_EQ(error.at("request_id"), std::string(res.message["X-Request-Id"]));
  // The client reconnects for the next request.
  const auto next = run(c.async_json(bhttp::verb::post, "/v1/echo", std::string(1000, 'x'), 5s));
  ASSERT_FALSE(next.error) << next.error.message();
  EXPECT_EQ(next.message.result_int(), 200u);
}

// /small takes 16 bytes, /large 8 KiB, anything else the server's 1 KiB.
body_limit_rule small_and_large() {
  return [](const request& header) -> std::optional<std::size_t> {
    if (header.target() == "/small") return 16;
    if (header.target() == "/large") return 8192;
    return std::nullopt;
  };
}

TEST_F(http_test, body_limit_is_the_routes_else_the_servers) {
  server_options options;
  options.body_limit = 1024;
  start_server(options, small_and_large());
  client c(io_.get_executor(), "127.0.0.1", port());
  const auto post = [&](std::string target, std::size_t size) {
    const auto res = run(c.async_json(bhttp::verb::post, std::move(target), std::string(size, 'x'), 5s));
    EXPECT_FALSE(res.error) << res.error.message();
    return res.message.result_int();
  };
  EXPECT_EQ(post("/small", 16), 200u);
  EXPECT_EQ(post("/small", 17), 413u);
  EXPECT_EQ(post("/large", 4096), 200u);  // over the server's limit
  EXPECT_EQ(post("/large", 8193), 413u);
  EXPECT_EQ(post("/other", 1024), 200u);
  EXPECT_EQ(post("/other", 1025), 413u);
  EXPECT_EQ(seen_connections_.size(), 3u);  // the handler never saw a refused request
}

TEST_F(http_test, declared_length_over_the_limit_is_refused_before_100_continue) {
  start_server({}, small_and_large());
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket, "POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\nExpect: 100-continue\r\n\r\n"));
  const std::string data = run(read_until_contains(socket, R"("code":"payload_too_large")"));
  EXPECT_TRUE(data.starts_with("HTTP/1.1 413")) << data;
  EXPECT_TRUE(seen_connections_.empty());
}

TEST_F(http_test, chunked_body_over_the_limit_gets_413) {
  start_server({}, small_and_large());
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket,
               "POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "a\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"));
  const std::string data = run(read_until_contains(socket, R"("code":"payload_too_large")"));
  EXPECT_TRUE(data.starts_with("HTTP/1.1 413")) << data;
  EXPECT_TRUE(seen_connections_.empty());
}

TEST_F(http_test, malformed_request_gets_400_and_close) {
  start_server();
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket, "NOT A VALID REQUEST\r\n\r\n"));
  const std::string data = run(read_until_closed(socket));
  EXPECT_TRUE(data.starts_with("HTTP/1.1 400")) << data;
  EXPECT_NE(data.find(R"("code":"invalid_request")"), std::string::npos) << data;
  // The server lingers until the peer closes, so it cannot reset its answer away.
  socket.close();
  EXPECT_TRUE(wait_until([&] { return server_->open_connections() == 0; }, 200ms));
}

TEST_F(http_test, expect_100_continue_is_answered_before_the_body) {
  start_server();
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_EQ(run(read_until_contains(socket, "\r\n\r\n")), "HTTP/1.1 100 Continue\r\n\r\n");
  run(send_raw(socket, "hello"));
  const std::string data = run(read_until_contains(socket, R"("body":"hello")"));
  EXPECT_TRUE(data.starts_with("HTTP/1.1 200")) << data;
}

TEST_F(http_test, handler_exception_gets_500_without_internals) {
  start_server();
  client c(io_.get_executor(), "127.0.0.1", port());
  const auto res = get_traced(c, "/throw", "trace-500");
  ASSERT_FALSE(res.error) << res.error.message();
  EXPECT_EQ(res.message.result_int(), 500u);
  EXPECT_EQ(res.message.body(), R"({"error":{"code":"internal","message":"internal error","request_id":"trace-500"}})");
  EXPECT_EQ(res.message["X-Request-Id"], "trace-500");
  EXPECT_EQ(res.message.body().find("hunter2"), std::string::npos);
  // Still usable: the connection stays open after a handler failure.
  EXPECT_FALSE(get(c, "/after").error);
}

TEST_F(http_test, header_timeout_disconnects_slowloris) {
  start_server_timing_out(&server_options::header_timeout);
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  const auto started = steady_clock::now();
  run(send_raw(socket, "GET / HTTP/1.1\r\nHost: x\r\n"));
  using asio::experimental::awaitable_operators::operator||;
  run(read_until_closed(socket) || trickle_header_lines(socket));
  expect_closed_on_timeout(started);
}

TEST_F(http_test, idle_timeout_closes_keep_alive_connection) {
  start_server_timing_out(&server_options::idle_timeout);
  tcp::socket socket(io_);
  ASSERT_FALSE(run(try_connect(socket, port())));
  run(send_raw(socket, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto answered = steady_clock::now();
  const std::string data = run(read_until_closed(socket));
  expect_closed_on_timeout(answered);
  EXPECT_TRUE(data.starts_with("HTTP/1.1 200")) << data;
}

TEST_F(http_test, graceful_shutdown_finishes_in_flight_request) {
  start_server();
  tcp::socket idle_socket(io_);
  ASSERT_FALSE(run(try_connect(idle_socket, port())));
  ASSERT_TRUE(wait_until([&] { return server_->open_connections() == 1; }));

  client slow(io_.get_executor(), "127.0.0.1", port());
  std::optional<client_response> slow_result;
  spawn(slow.async_json(bhttp::verb::get, "/slow", "", 5s), [&](client_response r) { slow_result = std::move(r); });
  ASSERT_TRUE(wait_until([&] { return slow_started_; }));

  bool shut_down = false;
  spawn(server_->async_shutdown(5s), [&] { shut_down = true; });
  // The idle connection is closed at once; the in-flight one stays.
  ASSERT_TRUE(wait_until([&] { return server_->open_connections() == 1; }));
  EXPECT_EQ(run(read_until_closed(idle_socket), 1s), "");
  EXPECT_FALSE(shut_down);

  tcp::socket late(io_);
  EXPECT_EQ(run(try_connect(late, port())), asio::error::connection_refused);

  ASSERT_TRUE(wait_until([&] { return shut_down; }));
  ASSERT_TRUE(slow_result.has_value());
  ASSERT_FALSE(slow_result->error) << slow_result->error.message();
  EXPECT_EQ(slow_result->message.result_int(), 200u);
  EXPECT_FALSE(slow_result->message.keep_alive());
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_F(http_test, shutdown_force_closes_after_grace) {
  slow_delay_ = 10s;
  start_server();
  client slow(io_.get_executor(), "127.0.0.1", port());
  std::optional<client_response> slow_result;
  spawn(slow.async_json(bhttp::verb::get, "/slow", "", 5s), [&](client_response r) { slow_result = std::move(r); });
  ASSERT_TRUE(wait_until([&] { return slow_started_; }));
  const auto started = steady_clock::now();
  run(server_->async_shutdown(200ms));
  EXPECT_LT(steady_clock::now() - started, 1s);
  ASSERT_TRUE(wait_until([&] { return slow_result.has_value(); }));
  EXPECT_TRUE(slow_result->error);
}

TEST_F(http_test, client_times_out_against_slow_handler) {
  slow_delay_ = 1s;
  start_server();
  client c(io_.get_executor(), "127.0.0.1", port());
  const auto started = steady_clock::now();
  const auto res = get(c, "/slow", 200ms);
  const auto elapsed = steady_clock::now() - started;
  EXPECT_EQ(res.error, asio::error::timed_out);
  EXPECT_TRUE(res.sent);  // the server got the request: its outcome is unknown
  EXPECT_GE(elapsed, 150ms);
  EXPECT_LT(elapsed, 900ms);
  // The timed-out connection was dropped; the next request uses a new one.
  const auto next = get(c, "/fast");
  ASSERT_FALSE(next.error) << next.error.message();
  EXPECT_EQ(next.message.result_int(), 200u);
}

TEST_F(http_test, a_refused_connection_says_nothing_was_sent) {
  start_server();
  const auto closed_port = port();
  server_.reset();
  client c(io_.get_executor(), "127.0.0.1", closed_port);
  const auto res = get(c, "/fast");
  EXPECT_EQ(res.error, asio::error::connection_refused);
  EXPECT_FALSE(res.sent);
}

TEST_F(http_test, client_reconnects_after_server_closed_idle_connection) {
  server_options options;
  options.idle_timeout = 100ms;
  start_server(options);
  client c(io_.get_executor(), "127.0.0.1", port());
  ASSERT_FALSE(get(c, "/first").error);
  ASSERT_TRUE(wait_until([&] { return server_->open_connections() == 0; }));
  const auto res = get(c, "/second");
  ASSERT_FALSE(res.error) << res.error.message();
  EXPECT_EQ(res.message.result_int(), 200u);
}

TEST_F(http_test, request_id_is_echoed) {
  start_server();
  client c(io_.get_executor(), "127.0.0.1", port());

  const auto echoed = get_traced(c, "/echo", "trace-42");
  ASSERT_FALSE(echoed.error);
  EXPECT_EQ(echoed.message["X-Request-Id"], "trace-42");

  const auto not_found = get_traced(c, "/missing", "trace-43");
  ASSERT_FALSE(not_found.error);
  EXPECT_EQ(not_found.message.result_int(), 404u);
  EXPECT_EQ(not_found.message["X-Request-Id"], "trace-43");
  EXPECT_EQ(error_of(not_found.message).at("request_id"), "trace-43");
}

TEST(http_response, error_response_has_exact_shape) {
  request req(bhttp::verb::post, "/v1/holds", 11);
  req.set("X-Request-Id", "r1");
  const auto res = make_error_response(req, 409, "conflict", "already exists");
  EXPECT_EQ(res.result_int(), 409u);
  EXPECT_EQ(res.body(), R"({"error":{"code":"conflict","message":"already exists","request_id":"r1"}})");
  EXPECT_EQ(res["X-Request-Id"], "r1");
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res[bhttp::field::content_length], std::to_string(res.body().size()));
}

TEST(http_response, unusable_request_id_is_replaced) {
  const std::regex generated("req_[0-9a-f]{16}");
  request none(bhttp::verb::get, "/", 11);
  EXPECT_TRUE(std::regex_match(request_id_of(none), generated));

  request too_long(bhttp::verb::get, "/", 11);
  too_long.set("X-Request-Id", std::string(200, 'a'));
  const auto res = make_error_response(too_long, 400, "invalid_request", "bad");
  const std::string id(res["X-Request-Id"]);
  EXPECT_TRUE(std::regex_match(id, generated)) << id;
  EXPECT_EQ(error_of(res).at("request_id"), id);
  EXPECT_EQ(make_json_response(too_long, 200, "{}").count("X-Request-Id"), 0u);

  request ok(bhttp::verb::get, "/", 11);
  ok.set("X-Request-Id", std::string(128, 'b'));
  EXPECT_EQ(request_id_of(ok), std::string(128, 'b'));
}

TEST(http_response, json_response_follows_request_keep_alive) {
  request req(bhttp::verb::get, "/", 11);
  req.keep_alive(false);
  const auto res = make_json_response(req, 200, R"({"ok":true})");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_EQ(res.body(), R"({"ok":true})");
  EXPECT_EQ(res.count("X-Request-Id"), 0u);
}

}  // namespace
