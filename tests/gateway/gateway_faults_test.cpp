// The system through the gateway while parts of it fail: rate limits under
// bursts, Redis killed and restarted empty, the relay killed between
// delivering a batch and saving its cursor, two relays at once, the
// orchestrator down (the only one, or one of two). Real processes throughout.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/stack.hpp"
#include "tests/support/ws_client.hpp"

namespace tally::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A client of one stack's gateway with acme's app key.
struct api {
  explicit api(stack& s) : client(s.gateway_port()) {}
  http_reply call(const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& key = acme_app_key) {
    return client.call(method, target, body, key);
  }
  http_reply post(const std::string& target, const json& body, const std::string& key = acme_app_key) {
    return call("POST", target, body.dump(), key);
  }
  std::string open_funded(std::int64_t amount) {
    auto id = unique_id("acct");
    EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 201);
    if (amount == 0) return id;
    auto r = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", amount}, {"biz_id", unique_id("fund")}});
    EXPECT_EQ(r.json()["state"], "completed") << r.body;
    return id;
  }
  json strong(const std::string& id) { return call("GET", "/v1/accounts/" + id + "?consistency=strong").json(); }
  // True once the projection serves exactly what the ledger says.
  bool projected_equals_ledger(const std::string& id) {
    auto r = call("GET", "/v1/accounts/" + id);
    return r.header("x-tally-read") == "projection" && r.json() == strong(id);
  }
  double metric(const std::string& name) {
    const auto text = call("GET", "/metrics", "", "").body;
    auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? 0 : std::stod(text.substr(at + name.size() + 2));
  }
  http_client client;
};

TEST(RateLimits, BurstsGet429AndAHotAccountDoesNotSlowOthers) {
  stack_options o;
  o.gateway_args = {"--limits.key_rate=1", "--limits.key_burst=30", "--limits.account_rate=1",
                    "--limits.account_burst=3"};
  stack s(o);
  api a(s);
  // Seconds since a phase began, rounded up: how many tokens may have come back.
  auto refilled = [](std::chrono::steady_clock::time_point since) {
    return static_cast<int>(std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count()) + 1;
  };
  // Per API key: a burst beyond 30 is refused with Retry-After.
  int accepted = 0, refused = 0;
  std::string retry_after;
  const auto burst_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 60; ++i) {
    auto r = a.call("GET", "/v1/sagas", "", globex_app_key);
    if (r.status == 429) {
      ++refused;
      retry_after = r.header("retry-after");
      EXPECT_EQ(r.json()["error"]["code"], "rate_limited");
    } else {
      EXPECT_EQ(r.status, 200);
      ++accepted;
    }
  }
  EXPECT_LE(accepted, 30 + refilled(burst_start));
  EXPECT_GT(refused, 0);
  EXPECT_GE(std::stoi(retry_after.empty() ? "0" : retry_after), 1);
  // Per account: writes to one account beyond its 3-token burst are refused;
  // writes to other accounts go through meanwhile.
  EXPECT_EQ(a.post("/v1/accounts", {{"account_id", "hot"}}).status, 201);
  int hot_accepted = 0, hot_refused = 0, calm_accepted = 0;
  const auto hot_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {
    auto hot = a.post("/v1/credits", {{"account_id", "hot"}, {"amount", 1}, {"biz_id", unique_id("h")}});
    (hot.status == 429 ? hot_refused : hot_accepted) += 1;
    if (hot.status == 429) {
      EXPECT_FALSE(hot.header("retry-after").empty());
    }
    if (i % 3 == 0) {
      auto calm = a.post("/v1/credits",
                         {{"account_id", "calm-" + std::to_string(i)}, {"amount", 1}, {"biz_id", unique_id("c")}});
      if (calm.status == 200 || calm.status == 202) ++calm_accepted;
    }
  }
  EXPECT_LE(hot_accepted, 3 + refilled(hot_start));
  EXPECT_GT(hot_refused, 0);
  EXPECT_EQ(calm_accepted, 3);
}

TEST(RedisFaults, WritesGoOnReadsFallBackAndProjectionsAreRebuilt) {
  stack_options o;
  o.gateway_args = {"--limits.key_rate=100", "--limits.key_burst=150"};
  stack s(o);
  api a(s);
  std::vector<std::string> accounts;
  for (int i = 0; i < 4; ++i) accounts.push_back(a.open_funded(100));
  for (const auto& id : accounts) ASSERT_TRUE(eventually([&] { return a.projected_equals_ledger(id); }));

  s.redis().kill9();
  // Writes keep working.
  auto t =
      a.post("/v1/transfers?wait_ms=5000",
             {{"from_account", accounts[0]}, {"to_account", accounts[1]}, {"amount", 30}, {"biz_id", unique_id("t")}});
  EXPECT_EQ(t.json()["state"], "completed") << t.body;
  auto given =
      a.post("/v1/credits?wait_ms=5000", {{"account_id", accounts[2]}, {"amount", 5}, {"biz_id", unique_id("c")}});
  EXPECT_EQ(given.json()["state"], "completed") << given.body;
  // A completed credit is read from the projection once there is one (a
  // completed transfer always from the orchestrator: its refunds change it).
  const std::string credit = given.json()["saga_id"];
  // Reads fall back to the shards, with what the ledger says.
  auto read = a.call("GET", "/v1/accounts/" + accounts[1]);
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.header("x-tally-read"), "authority");
  EXPECT_EQ(read.json()["balance"], 130);
  // Rate limiting goes on in process: a key's bucket (150, then 100/s) is
  // still enforced. Eight clients at once send faster than it refills,
  // however slow this machine is.
  std::atomic<int> accepted{0}, refused{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      http_client mine(s.gateway_port());
      for (int i = 0; i < 100; ++i) {
        const auto status = mine.call("GET", "/v1/sagas", "", globex_app_key).status;
        (status == 429 ? refused : accepted) += 1;
      }
    });
  }
  for (auto& c : clients) c.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LE(accepted.load(), 150 + static_cast<int>(100 * elapsed) + 1);
  EXPECT_GT(refused.load(), 0);
  EXPECT_GT(a.metric("tally_gateway_rate_limit_local_total"), 0);

  // Redis comes back empty: the relay rebuilds every projection from the ledgers.
  s.redis().start();
  for (const auto& id : accounts) EXPECT_TRUE(eventually([&] { return a.projected_equals_ledger(id); }, 20s)) << id;
  EXPECT_TRUE(eventually(
      [&] {
        auto r = a.call("GET", "/v1/sagas/" + credit);
        return r.header("x-tally-read") == "projection" && r.json()["state"] == "completed";
      },
      20s));
}

// Redis replaced a second time while the relay rebuilds the first loss: the
// rebuild starts over, and every projection comes back (the chaos run found
// a rebuild that marked complete a Redis holding only its last pages).
TEST(RedisFaults, ReplacedAgainDuringARebuildEveryProjectionComesBack) {
  stack_options o;
  o.relay_args = {"--rebuild_page=2"};
  o.relay_env = {{"TALLY_FAILPOINTS", "relay_rebuild_page=delay:300"}};
  stack s(o);
  api a(s);
  std::vector<std::string> accounts, sagas;
  for (int i = 0; i < 8; ++i) {
    accounts.push_back(a.open_funded(0));
    auto r = a.post("/v1/credits?wait_ms=5000",
                    {{"account_id", accounts.back()}, {"amount", 10 + i}, {"biz_id", unique_id("c")}});
    EXPECT_EQ(r.json()["state"], "completed") << r.body;
    sagas.push_back(r.json()["saga_id"]);
  }
  const auto all_projected = [&] {
    for (const auto& id : sagas)
      if (!s.redis().exists("tally:saga:acme/" + id)) return false;
    for (const auto& id : accounts)
      if (!a.projected_equals_ledger(id)) return false;
    return true;
  };
  ASSERT_TRUE(eventually(all_projected, 30s));
  s.redis().kill9();
  s.redis().start();
  // The orchestrator's 8 sagas take 4 pages of 300 ms: replace Redis again
  // once that rebuild has begun.
  ASSERT_TRUE(eventually([&] { return s.redis().exists("tally:projection-rebuild:orchestrator"); }, 15s));
  s.redis().kill9();
  s.redis().start();
  // The rebuild that started over ends, marks the source complete, and
  // every object is there.
  for (const char* source : {"orchestrator", "s0", "s1"})
    EXPECT_TRUE(eventually([&] { return s.redis().exists(std::string("tally:projection-source:") + source); }, 30s))
        << source;
  for (const auto& id : sagas) EXPECT_TRUE(s.redis().exists("tally:saga:acme/" + id)) << id;
  // (Through the gateway, whose Redis client may still be backing off from the restart.)
  for (const auto& id : accounts) EXPECT_TRUE(eventually([&] { return a.projected_equals_ledger(id); })) << id;
}

// The saga states a subscriber saw, checked: each change once (no
// document twice), in the order of the saga's updates.
std::vector<std::string> saga_states(ws_client& ws, const std::string& saga, const std::string& until) {
  std::vector<std::string> states;
  std::string last_update;
  json last_doc;
  for (int i = 0; i < 200 && (states.empty() || states.back() != until); ++i) {
    auto f = ws.next(10s);
    if (!f) break;
    auto j = json::parse(*f);
    if (j["type"] != "saga") continue;
    EXPECT_EQ(j["saga"]["saga_id"], saga);
    EXPECT_NE(j["saga"], last_doc) << "the same state twice";
    const std::string updated = j["saga"]["updated_at"];
    EXPECT_GE(updated, last_update);
    last_update = updated;
    last_doc = j["saga"];
    states.push_back(j["saga"]["state"]);
  }
  return states;
}

TEST(RelayFaults, KilledBetweenDeliveryAndCursorLosesNothingAndRepeatsNothing) {
  stack_options o;
  // The 4th delivered batch (of any consumer) kills the relay before it saves its cursor.
  o.relay_env = {{"TALLY_FAILPOINTS", "relay_after_deliver=crash@4"}};
  stack s(o);
  api a(s);
  const auto from = a.open_funded(100), to = a.open_funded(0);
  auto held = a.post("/v1/deductions?wait_ms=5000",
                     {{"account_id", from}, {"amount", 10}, {"biz_id", unique_id("h")}, {"hold_timeout_ms", 60000}});
  const std::string saga = held.json()["saga_id"];
  // The relay died on the way here (the writes above need more than four batches).
  ASSERT_TRUE(eventually([&] { return !s.relay().running(); }, 15s)) << "the failpoint did not fire";
  EXPECT_EQ(s.relay().wait_exit(), 137);

  ws_client ws(s.gateway_port(), "/v1/stream", {{"Authorization", std::string("Bearer ") + acme_app_key}});
  ASSERT_EQ(ws.status(), 101);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"sagas", {saga}}}.dump()));
  a.call("POST", "/v1/deductions/" + saga + "/confirm", "{}");
  auto t =
      a.post("/v1/transfers", {{"from_account", from}, {"to_account", to}, {"amount", 25}, {"biz_id", unique_id("t")}});

  s.relay().set_env("TALLY_FAILPOINTS", "");
  s.relay().start();
  ASSERT_TRUE(s.relay().wait_ready());
  const auto states = saga_states(ws, saga, "completed");
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), "completed");
  for (const auto& id : {from, to}) EXPECT_TRUE(eventually([&] { return a.projected_equals_ledger(id); }, 15s)) << id;
  EXPECT_EQ(a.strong(from)["balance"], 65);
  EXPECT_EQ(a.strong(to)["balance"], 25);
}

TEST(RelayFaults, TwoRelaysShareTheWorkAndASecondTakesOver) {
  stack s;
  api a(s);
  auto standby = s.make_relay();
  standby->start();
  ASSERT_TRUE(standby->wait_ready());
  const auto from = a.open_funded(100), to = a.open_funded(0);
  auto held = a.post("/v1/deductions?wait_ms=5000",
                     {{"account_id", from}, {"amount", 10}, {"biz_id", unique_id("h")}, {"hold_timeout_ms", 60000}});
  const std::string saga = held.json()["saga_id"];
  ws_client ws(s.gateway_port(), "/v1/stream", {{"Authorization", std::string("Bearer ") + acme_app_key}});
  ASSERT_EQ(ws.status(), 101);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"sagas", {saga}}}.dump()));
  s.relay().kill9();
  a.call("POST", "/v1/deductions/" + saga + "/confirm", "{}");
  for (int i = 0; i < 10; ++i)
    a.post("/v1/transfers", {{"from_account", from}, {"to_account", to}, {"amount", 1}, {"biz_id", unique_id("t")}});
  const auto states = saga_states(ws, saga, "completed");
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), "completed");
  for (const auto& id : {from, to}) EXPECT_TRUE(eventually([&] { return a.projected_equals_ledger(id); }, 15s)) << id;
}

TEST(OrchestratorFaults, WritesAre503WhileItIsDownAndRetrySafely) {
  stack s;
  api a(s);
  const auto id = a.open_funded(50);
  s.orchestrator().kill9();
  const json credit{{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("c")}};
  auto refused = a.post("/v1/credits", credit);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.json()["error"]["code"], "unavailable");
  // Reads do not need it.
  EXPECT_EQ(a.strong(id)["balance"], 50);
  s.orchestrator().start();
  ASSERT_TRUE(s.orchestrator().wait_ready());
  auto retried = a.post("/v1/credits?wait_ms=5000", credit);
  EXPECT_EQ(retried.json()["state"], "completed") << retried.body;
  EXPECT_EQ(a.strong(id)["balance"], 55);
}

TEST(OrchestratorFaults, WithTwoInstancesWritesGoOnWhenOneIsKilled) {
  stack_options two;
  two.orchestrators = 2;
  stack s(two);
  api a(s);
  const auto id = a.open_funded(50);
  s.orchestrator(0).kill9();
  s.orchestrator(0).wait_exit();  // a request it took before dying would be 503, unknown outcome
  auto credited = a.post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("c")}});
  EXPECT_EQ(credited.status, 200) << credited.body;
  EXPECT_EQ(credited.json()["state"], "completed") << credited.body;
  EXPECT_EQ(a.strong(id)["balance"], 55);
  // And back to the first when the second is the one that is gone.
  s.orchestrator(0).start();
  ASSERT_TRUE(s.orchestrator(0).wait_ready());
  s.orchestrator(1).kill9();
  s.orchestrator(1).wait_exit();
  auto again = a.post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 7}, {"biz_id", unique_id("c")}});
  EXPECT_EQ(again.json()["state"], "completed") << again.body;
  EXPECT_EQ(a.strong(id)["balance"], 62);
}

}  // namespace
}  // namespace tally::test
