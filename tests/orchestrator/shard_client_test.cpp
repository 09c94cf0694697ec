// The coalescing shard client against a real account_shard process: many
// concurrent calls share few requests, every reply maps to the answer the
// engine expects, and a shard that is down answers "unknown outcome".
#include "orchestrator/transport/shard_client.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "orchestrator/transport/shard_call.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::orch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using json = nlohmann::json;

class ShardClient : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = test::create_database("orch_client");
    port_ = test::free_port();
    // Without hot-account admission: these tests count exact answers of 8
    // concurrent calls per account, and on a loaded machine a commit can stall
    // past the 20 ms safe wait (answers account_busy, which the engine retries).
    shard_ = std::make_unique<test::shard_process>(db_, port_, std::vector<std::string>{"--admission.max_wait_ms=0"});
    shard_->start();
    ASSERT_TRUE(shard_->wait_ready()) << shard_->log_path();
    test::http_client http(port_);
    for (int i = 0; i < 50; ++i) {
      auto id = "acc-" + std::to_string(i);
      ASSERT_EQ(
          http.call("POST", "/v1/commands", json{{"type", "open_account"}, {"tenant", "t1"}, {"account_id", id}}.dump())
              .status,
          200);
      ASSERT_EQ(
          http.call("POST", "/v1/commands",
                    json{{"type", "credit"}, {"tenant", "t1"}, {"account_id", id}, {"biz_id", "seed"}, {"amount", 100}}
                        .dump())
              .status,
          200);
    }
  }
  void TearDown() override {
    if (shard_ && shard_->running()) {
      shard_->terminate();
      shard_->wait_exit();
    }
  }
  sharding::shard_endpoint endpoint() const { return {"s0", "127.0.0.1", port_}; }
  std::int64_t held(const std::string& account) const {
    return test::query_int(db_, "SELECT held FROM account WHERE account_id = '" + account + "'");
  }

  std::string db_;
  std::uint16_t port_ = 0;
  std::unique_ptr<test::shard_process> shard_;
};

// A call's command as the saga driver hands it to the client.
std::string wire(const outgoing_call& c, std::string_view tenant) {
  return contract::to_json(shard_command(c, tenant)).dump();
}

outgoing_call hold(std::string account, std::string key, std::int64_t amount) {
  outgoing_call c;
  c.op = participant_op::hold;
  c.account = std::move(account);
  c.biz_id = std::move(key);
  c.amount = amount;
  return c;
}

TEST_F(ShardClient, ConcurrentCallsShareRequestsAndEachGetsItsOwnAnswer) {
  constexpr int calls = 400;
  std::vector<answer> answers(calls);
  std::size_t requests = 0;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    shard_client client(io.get_executor(), endpoint(), test::internal_token);
    int done = 0;
    asio::steady_timer all(io, asio::steady_timer::time_point::max());
    for (int i = 0; i < calls; ++i) {
      // 8 holds of 10 per account on 50 accounts of 100; every 8th asks 1000.
      auto account = "acc-" + std::to_string(i % 50);
      auto amount = i % 8 == 7 ? 1000 : 10;
      auto call = [&, i, account, amount]() -> asio::awaitable<void> {
        answers[i] = co_await client.async_call(wire(hold(account, "h" + std::to_string(i), amount), "t1"));
        if (++done == calls) all.cancel();
      };
      asio::co_spawn(io, call, asio::detached);
    }
    boost::system::error_code ec;
    co_await all.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    requests = client.requests_sent();
  });
  int succeeded = 0, rejected = 0;
  for (int i = 0; i < calls; ++i) {
    if (i % 8 == 7) {
      EXPECT_EQ(answers[i].kind, answer_kind::rejected) << i;
      EXPECT_EQ(answers[i].code, "insufficient_funds") << i;
      ++rejected;
    } else {
      EXPECT_EQ(answers[i].kind, answer_kind::succeeded) << i << " " << answers[i].code;
      ++succeeded;
    }
  }
  EXPECT_EQ(succeeded, 350);
  EXPECT_EQ(rejected, 50);
  EXPECT_LT(requests, static_cast<std::size_t>(calls / 10)) << "calls were not coalesced";
  EXPECT_EQ(test::query_int(db_, "SELECT sum(held) FROM account"), 350 * 10);
}

TEST_F(ShardClient, RepliesMapToTheEnginesAnswers) {
  std::vector<answer> got;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    shard_client client(io.get_executor(), endpoint(), test::internal_token);
    auto send = [&](const outgoing_call& c) -> asio::awaitable<void> {
      got.push_back(co_await client.async_call(wire(c, "t1")));
    };
    co_await send(hold("acc-0", "sg_1", 30));  // succeeded
    co_await send(hold("acc-0", "sg_1", 31));  // same key, other amount: conflict
    outgoing_call release;
    release.op = participant_op::release;
    release.account = "acc-1";
    release.biz_id = "sg_2";
    co_await send(release);                   // before its hold: a tombstone
    co_await send(hold("acc-1", "sg_2", 5));  // the late hold is refused
    outgoing_call credit;
    credit.op = participant_op::credit;
    credit.account = "acc-2";
    credit.biz_id = "sg_3";
    credit.amount = 7;
    co_await send(credit);  // succeeded
    outgoing_call cancel;
    cancel.op = participant_op::cancel_key;
    cancel.account = "acc-2";
    cancel.target_type = "credit";
    cancel.target_id = "sg_3";
    co_await send(cancel);  // the credit applied
    cancel.target_id = "sg_4";
    co_await send(cancel);  // unused key: tombstoned ("cancelled")
    credit.biz_id = "sg_4";
    co_await send(credit);  // the late credit: cancelled
  });
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0].kind, answer_kind::succeeded);
  EXPECT_EQ(got[1].kind, answer_kind::conflict);
  EXPECT_EQ(got[2].kind, answer_kind::succeeded);
  EXPECT_EQ(got[3].kind, answer_kind::rejected);
  EXPECT_EQ(got[3].code, "hold_released");
  EXPECT_EQ(got[4].kind, answer_kind::succeeded);
  EXPECT_EQ(got[5].kind, answer_kind::already_applied_succeeded);
  EXPECT_EQ(got[6].kind, answer_kind::cancelled);  // the engine reads this as "the barrier holds"
  EXPECT_EQ(got[7].kind, answer_kind::cancelled);
  EXPECT_EQ(held("acc-0"), 30);
  EXPECT_EQ(held("acc-1"), 0);
  EXPECT_EQ(test::query_int(db_, "SELECT balance FROM account WHERE account_id = 'acc-2'"), 107);
}

TEST_F(ShardClient, AShardThatIsDownGetsNothingAndTheSameKeyWorksWhenItIsBack) {
  shard_->kill9();
  shard_->wait_exit();
  answer down, back;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    shard_client_options o;
    o.timeout = 500ms;
    shard_client client(io.get_executor(), endpoint(), test::internal_token, o);
    down = co_await client.async_call(wire(hold("acc-3", "sg_9", 10), "t1"));
  });
  EXPECT_EQ(down.kind, answer_kind::not_delivered);  // connection refused: the hold cannot have applied
  shard_ = std::make_unique<test::shard_process>(db_, port_);
  shard_->start();
  ASSERT_TRUE(shard_->wait_ready()) << shard_->log_path();
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    shard_client client(io.get_executor(), endpoint(), test::internal_token);
    back = co_await client.async_call(wire(hold("acc-3", "sg_9", 10), "t1"));
  });
  EXPECT_EQ(back.kind, answer_kind::succeeded) << back.code;
  EXPECT_EQ(held("acc-3"), 10);
}

TEST_F(ShardClient, AWrongTokenIsNeverASuccess) {
  answer a;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    shard_client client(io.get_executor(), endpoint(), "not-the-token");
    a = co_await client.async_call(wire(hold("acc-4", "sg_5", 10), "t1"));
  });
  EXPECT_EQ(a.kind, answer_kind::transport);
  EXPECT_EQ(a.code, "unauthorized");
  EXPECT_EQ(held("acc-4"), 0);
}

}  // namespace
}  // namespace tally::orch
