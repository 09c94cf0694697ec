// The orchestrator killed at every step boundary of every saga type, then
// restarted: every saga ends and every promise holds. Two instances under
// load, one killed: the other finishes its sagas, and no step takes effect
// twice. One restarted under its old name takes up what it held.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/orchestrator/cluster.hpp"

namespace tally::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct boundary_case {
  std::string failpoint;
  std::string collection;
  json body;
};

// The state of the saga with this business key, through any instance.
json find_saga(http_client& c, const std::string& type, const std::string& biz_id) {
  auto r = c.call("GET", "/v1/tenants/t1/sagas?type=" + type + "&biz_id=" + biz_id);
  auto sagas = r.json().is_object() ? r.json().value("sagas", json::array()) : json::array();
  return sagas.empty() ? json() : sagas[0];
}

TEST(OrchestratorCrash, KilledAtEveryStepBoundaryEverySagaEndsAndThePromisesHold) {
  cluster c;
  std::string on[2];  // an account on each shard
  for (int i = 0; on[0].empty() || on[1].empty(); ++i) {
    auto id = "acc-" + std::to_string(i);
    if (on[c.shard_of(id)].empty()) on[c.shard_of(id)] = id;
  }
  c.open(on[0], 1000);
  c.open(on[1], 1000);
  const json items = json::array({{{"account_id", on[0]}, {"amount", 5}}, {{"account_id", on[1]}, {"amount", 5}}});
  std::vector<boundary_case> cases;
  for (const auto* when : {"sending.", "answered."}) {
    for (const auto* step : {"hold_source", "credit_destination", "capture_source"})
      cases.push_back(
          {when + std::string(step), "transfers", {{"from_account", on[0]}, {"to_account", on[1]}, {"amount", 7}}});
    for (const auto* step : {"hold_items", "capture_items"})
      cases.push_back({when + std::string(step), "batch-deductions", {{"items", items}}});
    cases.push_back({when + std::string("credit_account"), "credits", {{"account_id", on[1]}, {"amount", 3}}});
    cases.push_back({when + std::string("debit_account"), "deductions", {{"account_id", on[0]}, {"amount", 3}}});
    cases.push_back({when + std::string("hold_account"),
                     "deductions",
                     {{"account_id", on[1]}, {"amount", 4}, {"hold_timeout_ms", 60000}}});
  }
  const std::map<std::string, std::string> type_of{
      {"transfers", "transfer"}, {"batch-deductions", "batch_deduct"}, {"credits", "credit"}, {"deductions", "deduct"}};

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& k = cases[i];
    SCOPED_TRACE(k.failpoint);
    auto body = k.body;
    body["biz_id"] = "crash-" + std::to_string(i);
    auto& doomed = c.start_orchestrator({{"TALLY_FAILPOINTS", k.failpoint + "=crash"}});
    {
      http_client to_doomed(doomed.port());
      post_saga(to_doomed, k.collection, body, 5000);  // dies on the way, or after answering
    }
    ASSERT_NE(doomed.wait_exit(10s), -1) << "the failpoint never fired: " << doomed.log_path();

    auto& revived = c.start_orchestrator();
    http_client api(revived.port());
    // The app resends its request: the same saga, whatever the crash left.
    auto again = post_saga(api, k.collection, body, 15000);
    ASSERT_TRUE(again.status == 200 || again.status == 202) << again.body;
    auto saga = again.json();
    if (saga["state"] == "awaiting_confirmation") {
      auto confirmed = api.call(
          "POST", "/v1/tenants/t1/deductions/" + saga["saga_id"].get<std::string>() + "/confirm?wait_ms=15000", "{}");
      ASSERT_EQ(confirmed.status, 200) << confirmed.body;
      saga = confirmed.json();
    }
    EXPECT_EQ(saga["state"], "completed") << saga.dump();
    EXPECT_EQ(find_saga(api, type_of.at(k.collection), body["biz_id"])["saga_id"], saga["saga_id"]);
    auto problems = c.check_promises();
    EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems) << " " << revived.log_path();
    revived.terminate();
    EXPECT_EQ(revived.wait_exit(), 0);
  }
  EXPECT_EQ(c.sagas(), static_cast<std::int64_t>(cases.size()));
}

// A transfer's credit goes out without its own write-ahead (only the
// saga's creation is durable before it): killed as the credit is sent or as
// its answer comes, and restarted past the deadline, the recovered saga
// must fence the credit off before it releases the hold — or find it
// applied and finish.
TEST(OrchestratorCrash, KilledAroundTheUnrecordedCreditAndRecoveredPastTheDeadline) {
  cluster c;
  std::string on[2];
  for (int i = 0; on[0].empty() || on[1].empty(); ++i) {
    auto id = "acc-" + std::to_string(i);
    if (on[c.shard_of(id)].empty()) on[c.shard_of(id)] = id;
  }
  c.open(on[0], 1000);
  c.open(on[1], 1000);
  const std::pair<std::string, std::string> cases[] = {{"sending.credit_destination", "failed"},
                                                       {"answered.credit_destination", "completed"}};
  std::int64_t moved = 0;
  for (const auto& [failpoint, end] : cases) {
    SCOPED_TRACE(failpoint);
    const json body = {{"from_account", on[0]},
                       {"to_account", on[1]},
                       {"amount", 7},
                       {"timeout_ms", 1000},
                       {"biz_id", "late-" + failpoint}};
    auto& doomed = c.start_orchestrator({{"TALLY_FAILPOINTS", failpoint + "=crash"}});
    const auto started = std::chrono::steady_clock::now();
    {
      http_client to_doomed(doomed.port());
      post_saga(to_doomed, "transfers", body, 5000);
    }
    ASSERT_NE(doomed.wait_exit(10s), -1) << "the failpoint never fired: " << doomed.log_path();
    // Restart only once the deadline has passed, so that the recovery
    // compensates instead of going forward.
    std::this_thread::sleep_until(started + 1500ms);
    auto& revived = c.start_orchestrator();
    http_client api(revived.port());
    auto again = post_saga(api, "transfers", body, 15000);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.json()["state"], end) << again.body;
    if (end == "failed") {
      EXPECT_EQ(again.json()["error"]["code"], "deadline_exceeded") << again.body;
    }
    moved += end == "completed" ? 7 : 0;
    EXPECT_EQ(c.balance(on[1]), 1000 + moved);
    EXPECT_EQ(c.balance(on[0]), 1000 - moved);
    auto problems = c.check_promises();
    EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems) << " " << revived.log_path();
    revived.terminate();
    EXPECT_EQ(revived.wait_exit(), 0);
  }
}

TEST(OrchestratorCrash, TwoInstancesOneKilledUnderLoadTheOtherFinishesItsSagas) {
  cluster c;
  std::vector<std::string> accounts;
  for (int i = 0; i < 20; ++i) {
    accounts.push_back("acc-" + std::to_string(i));
    c.open(accounts.back(), 10000);
  }
  auto& a = c.start_orchestrator();
  auto& b = c.start_orchestrator();
  constexpr int clients = 8, per_client = 60;
  std::atomic<int> sent{0}, resent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      http_client to_a(a.port()), to_b(b.port());
      for (int i = 0; i < per_client; ++i) {
        const auto& from = accounts[(t * 7 + i) % accounts.size()];
        const auto& to = accounts[(t * 7 + i + 1 + i % 5) % accounts.size()];
        json body{{"from_account", from},
                  {"to_account", to},
                  {"amount", 1 + i % 9},
                  {"biz_id", "load-" + std::to_string(t) + "-" + std::to_string(i)}};
        // Half the clients use A while it lives; a failed request goes to B with the same biz_id.
        auto r = post_saga(t % 2 == 0 ? to_a : to_b, "transfers", body, 0);
        if (r.status != 202 && r.status != 200) {
          ++resent;
          r = post_saga(to_b, "transfers", body, 0);
        }
        EXPECT_TRUE(r.status == 202 || r.status == 200) << r.body;
        ++sent;
      }
    });
  ASSERT_TRUE(eventually([&] { return sent.load() >= clients * per_client / 3; }, 30s));
  a.kill9();
  for (auto& th : threads) th.join();
  EXPECT_EQ(c.sagas(), clients * per_client);
  // B takes over A's sagas once their leases lapse.
  EXPECT_TRUE(eventually([&] { return c.sagas("state NOT IN ('completed', 'failed', 'compensated')") == 0; }, 30s))
      << c.sagas("state NOT IN ('completed', 'failed', 'compensated')") << " sagas left; " << b.log_path();
  EXPECT_EQ(c.sagas("state <> 'completed'"), 0);
  auto problems = c.check_promises();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  http_client metrics(b.port());
  auto text = metrics.call("GET", "/metrics", "", "").body;
  EXPECT_NE(text.find("tally_orch_sagas_claimed_total"), std::string::npos);
  EXPECT_EQ(text.find("tally_orch_sagas_claimed_total 0\n"), std::string::npos) << "B claimed nothing";
}

// In containers on the host network every incarnation has pid 1 and the same
// port; a configured name repeats too. The restarted process must still
// drive what its predecessor held (found by the chaos run: sagas waited for
// ever, leased to a name whose heartbeat the successor kept renewing).
TEST(OrchestratorCrash, RestartedUnderTheSameNameDrivesWhatItsPredecessorHeld) {
  cluster c;
  c.open("held-0", 100);
  auto& a = c.start_orchestrator({}, {"--instance=the-only-one"});
  http_client to_a(a.port());
  auto held = post_saga(to_a, "deductions",
                        {{"account_id", "held-0"}, {"amount", 30}, {"biz_id", "held-1"}, {"hold_timeout_ms", 1000}});
  ASSERT_EQ(held.json()["state"], "awaiting_confirmation") << held.body;
  const auto id = held.json()["saga_id"].get<std::string>();
  a.kill9();
  a.wait_exit();
  a.start();
  ASSERT_TRUE(a.wait_ready()) << a.log_path();
  http_client again(a.port());
  const auto state = [&] {
    auto j = get_saga(again, id).json();
    return j.is_object() ? j.value("state", "") : "";
  };
  EXPECT_TRUE(eventually([&] { return state() == "compensated"; }, 15s)) << state() << "; " << a.log_path();
  auto problems = c.check_promises();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

}  // namespace
}  // namespace tally::test
