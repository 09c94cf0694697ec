// The saga runner's parts that need no database: the lease decision, the
// settled notification's payload, how an action's result is stored, and the
// task group's stop and join.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "orchestrator/service/remote_actions.hpp"
#include "orchestrator/service/saga_driver.hpp"
#include "orchestrator/service/task_group.hpp"
#include "tests/orchestrator/sagas.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::orch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

const instant t0{std::chrono::milliseconds(1'764'583'200'000)};

TEST(RunnerParts, ASagaIsKeptWhileItsNextWakeIsWithinTheHorizon) {
  auto s = testing::transfer_saga();
  s.state = saga_state::running;
  s.wake = t0 + 10s;
  EXPECT_TRUE(keeps_lease(s, t0, 10s));
  EXPECT_FALSE(keeps_lease(s, t0, 9999ms));
  s.wake = std::nullopt;  // nothing wakes it: whoever is asked to act claims it
  EXPECT_FALSE(keeps_lease(s, t0, 10s));
  s.wake = t0;
  s.state = saga_state::completed;
  EXPECT_FALSE(keeps_lease(s, t0, 10s));
}

TEST(RunnerParts, TheSettledNotificationCarriesAnActionId) {
  EXPECT_EQ(settled_action_id("42"), 42);
  EXPECT_EQ(settled_action_id("9223372036854775807"), 9223372036854775807);
  for (auto bad : {"", "0", "-3", "42 ", "4x", "99999999999999999999"}) EXPECT_EQ(settled_action_id(bad), std::nullopt);
}

TEST(RunnerParts, ActionResultsAreStoredAsTheirNames) {
  for (auto r : {engine::request_result::done, engine::request_result::already, engine::request_result::invalid_state})
    EXPECT_EQ(request_result_from(to_string(r)), r);
  EXPECT_EQ(to_string(engine::request_result::invalid_state), "invalid_state");
  EXPECT_EQ(request_result_from("DONE"), std::nullopt);
  EXPECT_EQ(request_result_from(""), std::nullopt);
}

TEST(RunnerParts, StoppingAGroupEndsItsWaitsAndJoinWaitsForEveryChild) {
  test::run_coroutine([](asio::io_context& io) -> asio::awaitable<void> {
    task_group group(io.get_executor());
    asio::steady_timer woken(io, asio::steady_timer::time_point::max());
    std::vector<std::string> ended;
    auto sleeper = [&]() -> asio::awaitable<void> {
      const bool slept = co_await group.async_sleep(1h);
      ended.push_back(slept ? "sleeper slept" : "sleeper stopped");
    };
    auto waiter = [&]() -> asio::awaitable<void> {
      // A timer cancelled by its owner wakes the child; the group still runs.
      const bool woke = co_await group.async_wait(woken);
      ended.push_back(woke ? "waiter woken" : "waiter stopped");
      const bool slept = co_await group.async_sleep(1h);
      ended.push_back(slept ? "waiter slept" : "waiter stopped");
    };
    auto quick = [&]() -> asio::awaitable<void> {
      const bool slept = co_await group.async_sleep(1ms);
      ended.push_back(slept ? "quick slept" : "quick stopped");
    };
    group.spawn(sleeper);
    group.spawn(waiter);
    group.spawn(quick);
    EXPECT_EQ(group.running(), 3u);
    asio::steady_timer pause(io, 20ms);
    co_await pause.async_wait(asio::use_awaitable);
    woken.cancel();
    pause.expires_after(20ms);
    co_await pause.async_wait(asio::use_awaitable);
    EXPECT_EQ(ended, (std::vector<std::string>{"quick slept", "waiter woken"}));
    group.stop();
    co_await group.async_join();
    EXPECT_EQ(group.running(), 0u);
    EXPECT_EQ(ended, (std::vector<std::string>{"quick slept", "waiter woken", "sleeper stopped", "waiter stopped"}));
    // A wait after the stop ends at once.
    EXPECT_FALSE(co_await group.async_sleep(1h));
  });
}

}  // namespace
}  // namespace tally::orch
