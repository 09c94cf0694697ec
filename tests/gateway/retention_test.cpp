// Retention through the whole system with short settings: the outbox
// events every consumer delivered are pruned from every source, a settled
// saga's projection expires and its read goes to the saga store, a saga
// still running keeps its projection, and a replay of a settled saga's
// business key still returns its stored result (and a changed request is
// still a conflict). Real processes throughout.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/pg_fixture.hpp"
#include "tests/support/stack.hpp"

namespace tally::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class Retention : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_options o;
    o.relay_args = {"--saga_projection_ttl_ms=2000", "--outbox_min_age_ms=0", "--prune_interval_ms=200"};
    system_ = new stack(o);
  }
  static void TearDownTestSuite() {
    delete system_;
    system_ = nullptr;
  }
  http_reply post(const std::string& target, const json& body) {
    return client_.call("POST", target, body.dump(), acme_app_key);
  }
  http_reply get(const std::string& target) { return client_.call("GET", target, "", acme_app_key); }
  static std::int64_t outbox_rows(const std::string& conninfo) {
    return query_int(conninfo, "SELECT count(*) FROM outbox_event");
  }

  static stack* system_;
  http_client client_{system_->gateway_port()};
};

stack* Retention::system_ = nullptr;

TEST_F(Retention, SettledSagaProjectionsExpireAndReadThroughWhileRunningOnesStay) {
  const auto id = unique_id("acct");
  ASSERT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 201);
  const json credit{{"account_id", id}, {"amount", 25}, {"biz_id", unique_id("c")}};
  auto settled = post("/v1/credits?wait_ms=5000", credit);
  ASSERT_EQ(settled.json()["state"], "completed") << settled.body;
  const std::string settled_id = settled.json()["saga_id"];
  auto held = post("/v1/deductions?wait_ms=5000",
                   {{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("h")}, {"hold_timeout_ms", 60000}});
  ASSERT_EQ(held.json()["state"], "awaiting_confirmation") << held.body;
  const std::string running_id = held.json()["saga_id"];
  const auto settled_key = "tally:saga:acme/" + settled_id, running_key = "tally:saga:acme/" + running_id;

  // Delivered (the hold came after the credit, in the same outbox), then gone by its time to live.
  ASSERT_TRUE(eventually([&] { return system_->redis().exists(running_key); }));
  EXPECT_TRUE(eventually([&] { return !system_->redis().exists(settled_key); }, 10s));
  auto read = get("/v1/sagas/" + settled_id);
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.header("x-tally-read"), "authority");
  EXPECT_EQ(read.json()["state"], "completed");
  EXPECT_TRUE(system_->redis().exists(running_key));  // not settled: no time to live
  EXPECT_EQ(get("/v1/sagas/" + running_id).header("x-tally-read"), "projection");

  // A replay still finds the stored result; different content is still a conflict.
  auto again = post("/v1/credits?wait_ms=5000", credit);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(again.json()["saga_id"], settled_id);
  auto changed = credit;
  changed["amount"] = 26;
  auto conflict = post("/v1/credits?wait_ms=5000", changed);
  EXPECT_EQ(conflict.status, 422) << conflict.body;
  EXPECT_EQ(conflict.json()["error"]["code"], "idempotency_conflict");
}

TEST_F(Retention, EveryOutboxIsPrunedOnceEveryConsumerDeliveredIt) {
  const auto id = unique_id("acct");
  ASSERT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 201);
  for (int i = 0; i < 5; ++i) {
    auto r = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 1 + i}, {"biz_id", unique_id("c")}});
    ASSERT_EQ(r.json()["state"], "completed") << r.body;
  }
  for (const auto* db : {"s0", "s1", "orchestrator"}) {
    const auto& conninfo =
        std::string(db) == "orchestrator" ? system_->saga_conninfo() : system_->shard_conninfo(db[1] == '0' ? 0 : 1);
    EXPECT_TRUE(eventually([&] { return outbox_rows(conninfo) == 0; }, 15s)) << db << ": " << outbox_rows(conninfo);
  }
  // Nothing was pruned before it was delivered: the projection has the last state.
  EXPECT_TRUE(eventually([&] {
    auto r = get("/v1/accounts/" + id);
    return r.header("x-tally-read") == "projection" && r.json()["balance"] == 15;
  }));
}

}  // namespace
}  // namespace tally::test
