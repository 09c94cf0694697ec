// The Redis projection sink against a real redis-server: forgetting a
// source (after its failover) removes that source's objects, over many SCAN
// pages, and its marker, and nothing of the other sources.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/projection/keys.hpp"
#include "common/redis/client.hpp"
#include "relay/sink/projection_sink.hpp"
#include "tests/support/redis_process.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

std::vector<object_state> accounts(const std::string& prefix, int n) {
  std::vector<object_state> out;
  for (int i = 0; i < n; ++i)
    out.push_back({object_kind::account, "t", prefix + std::to_string(i), 3, R"({"balance":1})", false, 0});
  return out;
}

class ProjectionSink : public ::testing::Test {
 protected:
  void SetUp() override { server_.start(); }
  redis::client_options options() const {
    redis::client_options o;
    o.port = server_.port();
    o.timeout = 5s;
    return o;
  }
  test::redis_process server_;
};

TEST_F(ProjectionSink, ForgettingASourceRemovesItsObjectsAndMarkerOnly) {
  std::vector<std::string> left;
  delivery refused;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    redis::client redis(io.get_executor(), options());
    projection_sink sink(redis, 0ms);
    // s0 holds 2,500 accounts (three SCAN pages and more), s1 ten.
    for (const auto& [source, objects] :
         {std::pair{std::string("s0"), accounts("a", 2500)}, std::pair{std::string("s1"), accounts("b", 10)}}) {
      EXPECT_EQ((co_await sink.async_begin_rebuild(source)).status, delivery_status::delivered);
      for (std::size_t at = 0; at < objects.size(); at += 500) {
        std::span<const object_state> page(objects.data() + at, std::min<std::size_t>(500, objects.size() - at));
        EXPECT_EQ((co_await sink.async_restore(source, page)).status, delivery_status::delivered);
      }
      EXPECT_EQ((co_await sink.async_finish_rebuild(source)).status, delivery_status::delivered);
    }
    // A saga delivered by s0, and a projection written before objects kept
    // their source.
    std::vector<outbox_event> events(1);
    events[0] = {1, "10", "e-1", object_kind::saga, "t", "sg_1", 1, "saga.state", R"({"state":"running"})", 0};
    EXPECT_EQ((co_await sink.async_deliver("s0", events)).status, delivery_status::delivered);
    auto legacy = co_await redis.async_exec(redis::make_command("HSET", "tally:account:t/old", "v", "1", "doc", "{}"));
    EXPECT_TRUE(legacy.ok());

    EXPECT_EQ((co_await sink.async_forget("s0")).status, delivery_status::delivered);

    // Until a rebuild marks s0 complete again, its deliveries are refused.
    refused = co_await sink.async_deliver("s0", events);
    std::string at = "0";
    do {
      auto page = co_await redis.async_exec(redis::make_command("SCAN", at, "COUNT", "1000"));
      if (!page.ok() || page.v.elements.size() != 2) break;
      at = page.v.elements[0].text;
      for (const auto& k : page.v.elements[1].elements) left.push_back(k.text);
    } while (at != "0");
  });
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{projection::source_marker("s1")};
  for (int i = 0; i < 10; ++i) expected.push_back(projection::account_key("t", "b" + std::to_string(i)));
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(left, expected);
  EXPECT_EQ(refused.status, delivery_status::rebuild);
}

}  // namespace
}  // namespace tally::relay
