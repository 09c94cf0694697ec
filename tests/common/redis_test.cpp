// The Redis client against a real redis-server.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/redis/client.hpp"
#include "tests/support/redis_process.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::redis {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override { server_.start(); }
  client_options options() const {
    client_options o;
    o.port = server_.port();
    return o;
  }
  test::redis_process server_;
};

TEST_F(RedisTest, CommandsAndReplyTypes) {
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    client c(io.get_executor(), options());
    auto set = co_await c.async_exec(make_command("SET", "k", std::string("a\0b", 3)));
    EXPECT_TRUE(set.ok());
    EXPECT_EQ(set.v.type, value::kind::status);
    auto get = co_await c.async_exec(make_command("GET", "k"));
    EXPECT_EQ(get.v.type, value::kind::string);
    EXPECT_EQ(get.v.text, std::string("a\0b", 3));
    auto missing = co_await c.async_exec(make_command("GET", "nothing"));
    EXPECT_EQ(missing.v.type, value::kind::nil);
    auto n = co_await c.async_exec(make_command("INCRBY", "n", "41"));
    EXPECT_EQ(n.v.integer, 41);
    co_await c.async_exec(make_command("RPUSH", "l", "x", "y"));
    auto list = co_await c.async_exec(make_command("LRANGE", "l", "0", "-1"));
    EXPECT_EQ(list.v.type, value::kind::array);
    EXPECT_EQ(list.v.elements.size(), 2u);
    auto wrong = co_await c.async_exec(make_command("INCR", "k"));
    EXPECT_FALSE(wrong.error);
    EXPECT_TRUE(wrong.v.is_error());
    EXPECT_FALSE(wrong.ok());
    EXPECT_TRUE(c.reachable());
  });
}

// Many concurrent callers share the pipelined connections; each gets its own reply.
TEST_F(RedisTest, ConcurrentCallersGetTheirOwnReplies) {
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    client c(io.get_executor(), options());
    constexpr int callers = 500;
    int right = 0;
    int finished = 0;
    for (int i = 0; i < callers; ++i) {
      auto one = [&c, &right, &finished, i]() -> asio::awaitable<void> {
        auto r = co_await c.async_exec(make_command("INCRBY", "counter:" + std::to_string(i % 7), std::to_string(i)));
        auto echo = co_await c.async_exec(make_command("ECHO", "caller-" + std::to_string(i)));
        if (r.ok() && echo.v.text == "caller-" + std::to_string(i)) ++right;
        ++finished;
      };
      asio::co_spawn(io, one, asio::detached);
    }
    asio::steady_timer t(io);
    for (auto until = std::chrono::steady_clock::now() + 10s;
         finished < callers && std::chrono::steady_clock::now() < until;) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(right, callers);
    long total = 0;
    for (int k = 0; k < 7; ++k) {
      auto r = co_await c.async_exec(make_command("GET", "counter:" + std::to_string(k)));
      total += std::stol(r.v.text);
    }
    EXPECT_EQ(total, callers * (callers - 1) / 2);
  });
}

TEST_F(RedisTest, ScriptsLoadThemselvesOnce) {
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    client c(io.get_executor(), options());
    const script s("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    auto first = co_await c.async_eval(s, make_command("s"), make_command("5"));
    EXPECT_EQ(first.v.integer, 5);
    auto known = co_await c.async_exec(make_command("SCRIPT", "EXISTS", s.sha1));
    EXPECT_EQ(known.v.elements.at(0).integer, 1);
    auto second = co_await c.async_eval(s, make_command("s"), make_command("2"));
    EXPECT_EQ(second.v.integer, 7);
  });
}

// Redis killed: commands fail fast (no connect timeout per command), and
// the client reconnects by itself once Redis is back.
TEST_F(RedisTest, FailsFastWhileDownAndRecovers) {
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    client c(io.get_executor(), options());
    auto before = co_await c.async_exec(make_command("PING"));
    EXPECT_TRUE(before.ok());
    server_.kill9();
    auto lost = co_await c.async_exec(make_command("PING"));
    EXPECT_TRUE(lost.error);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) {
      auto r = co_await c.async_exec(make_command("PING"));
      EXPECT_TRUE(r.error);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_FALSE(c.reachable());
    server_.start();
    bool back = false;
    asio::steady_timer t(io);
    for (auto until = std::chrono::steady_clock::now() + 10s; !back && std::chrono::steady_clock::now() < until;) {
      auto r = co_await c.async_exec(make_command("PING"));
      back = r.ok();
      t.expires_after(20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_TRUE(back);
    EXPECT_TRUE(c.reachable());
  });
}

}  // namespace
}  // namespace tally::redis
