// The relay's pure parts: source configuration, public documents, backoff,
// what the outbox may lose and how long a projection lives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "relay/outbox/event.hpp"
#include "relay/outbox/retention.hpp"
#include "relay/service/pump.hpp"
#include "relay/service/wake.hpp"
#include "relay/sink/projection_sink.hpp"
#include "relay/sink/push_sink.hpp"

namespace tally::relay {
namespace {

using nlohmann::json;

std::string refused(const char* text) {
  auto r = parse_sources(json::parse(text));
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "accepted";
}

TEST(Sources, Parse) {
  auto r = parse_sources(json::parse(R"([{"name":"s0","kind":"shard","conninfo":"dbname=a"},
                                         {"name":"orchestrator","kind":"orchestrator","conninfo":"dbname=b"}])"));
  ASSERT_TRUE(std::holds_alternative<std::vector<source_config>>(r));
  const auto& s = std::get<std::vector<source_config>>(r);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].kind, source_kind::shard);
  EXPECT_EQ(s[1].kind, source_kind::orchestrator);
  EXPECT_EQ(s[1].conninfo, "dbname=b");
}

TEST(Sources, RefuseBadConfiguration) {
  EXPECT_EQ(refused("[]"), "sources must be a non-empty JSON array");
  EXPECT_EQ(refused(R"({"name":"s0"})"), "sources must be a non-empty JSON array");
  EXPECT_EQ(refused(R"([{"name":"s 0","kind":"shard","conninfo":"x"}])"), "bad source name 's 0'");
  EXPECT_EQ(refused(R"([{"name":"s0","kind":"disk","conninfo":"x"}])"),
            "source s0: kind must be shard or orchestrator");
  EXPECT_EQ(refused(R"([{"name":"s0","kind":"shard"}])"), "source s0: conninfo is required");
  EXPECT_EQ(refused(R"([{"name":"s0","kind":"shard","conninfo":"x"},{"name":"s0","kind":"shard","conninfo":"y"}])"),
            "source s0 is named twice");
}

TEST(PublicDoc, AccountLosesTenantAndCauseAndGainsItsTime) {
  auto doc = public_doc(object_kind::account,
                        R"({"tenant":"t","account_id":"a","balance":5,"held":1,"available":4,"status":"active",
                            "version":3,"cause":{"type":"credit","biz_id":"c"}})",
                        1764583200123);
  ASSERT_TRUE(doc);
  EXPECT_EQ(json::parse(*doc), json::parse(R"({"account_id":"a","balance":5,"held":1,"available":4,"status":"active",
                                              "version":3,"updated_at":"2025-12-01T10:00:00.123Z"})"));
  EXPECT_FALSE(public_doc(object_kind::account, "[1]", 0));
}

TEST(PublicDoc, SagaIsItsPayload) {
  EXPECT_EQ(public_doc(object_kind::saga, R"({"saga_id":"sg"})", 0), R"({"saga_id":"sg"})");
  EXPECT_FALSE(public_doc(object_kind::saga, "null", 0));
}

TEST(PushBody, CarriesDocumentsAsTheyAre) {
  std::vector<outbox_event> events(2);
  events[0] = {1, "10", "e-1", object_kind::saga, "t", "sg_1", 4, "saga.state", R"({"state":"completed"})", 0};
  events[1] = {2, "10", "e-2", object_kind::account, "t", "a", 2, "account.credited", "", 0};  // no document: left out
  auto bodies = push_bodies("orchestrator", events, 1 << 20);
  ASSERT_EQ(bodies.size(), 1u);
  auto body = json::parse(bodies[0]);
  EXPECT_EQ(body["source"], "orchestrator");
  ASSERT_EQ(body["events"].size(), 1u);
  EXPECT_EQ(body["events"][0]["doc"]["state"], "completed");
  EXPECT_EQ(body["events"][0]["kind"], "saga");
  EXPECT_EQ(body["events"][0]["version"], 4);
  EXPECT_EQ(body["events"][0]["event_id"], "e-1");
  EXPECT_FALSE(body.contains("resync"));
}

// After a failover, a rebuild's object states go to the gateway marked as
// a resync, without event ids.
TEST(PushBody, ResyncCarriesObjectStates) {
  std::vector<object_state> states(1);
  states[0] = {object_kind::account, "t", "a", 7, R"({"balance":5})", false, 0};
  auto bodies = resync_bodies("s0", states, 1 << 20);
  ASSERT_EQ(bodies.size(), 1u);
  auto body = json::parse(bodies[0]);
  EXPECT_EQ(body["source"], "s0");
  EXPECT_EQ(body["resync"], true);
  ASSERT_EQ(body["events"].size(), 1u);
  EXPECT_EQ(body["events"][0]["doc"]["balance"], 5);
  EXPECT_EQ(body["events"][0]["version"], 7);
  EXPECT_FALSE(body["events"][0].contains("event_id"));
}

TEST(PushBody, SplitsLargeBatches) {
  std::vector<outbox_event> events(5);
  for (std::size_t i = 0; i < events.size(); ++i)
    events[i] = {static_cast<std::int64_t>(i),
                 "1",
                 "e",
                 object_kind::saga,
                 "t",
                 "sg",
                 static_cast<std::int64_t>(i),
                 "saga.state",
                 R"({"pad":")" + std::string(100, 'x') + R"("})",
                 0};
  auto bodies = push_bodies("o", events, 250);  // about two events per body
  ASSERT_EQ(bodies.size(), 3u);
  std::size_t total = 0;
  for (const auto& b : bodies) total += json::parse(b)["events"].size();
  EXPECT_EQ(total, 5u);
  EXPECT_TRUE(push_bodies("o", {}, 250).empty());
}

TEST(WakeSchedule, FallsBackSlowlyAfterTheLastWake) {
  using namespace std::chrono_literals;
  const std::chrono::steady_clock::time_point t0{};
  wake_schedule s(1000ms, retry::backoff{2ms, 50ms}, t0);
  EXPECT_EQ(s.due(), t0 + 1000ms);
  s.read(t0 + 5ms, false);  // nothing pending: still the fallback
  EXPECT_EQ(s.due(), t0 + 1000ms);
  s.woken(t0 + 400ms);  // a notification: the fallback counts from it
  EXPECT_EQ(s.due(), t0 + 1400ms);
}

TEST(WakeSchedule, RetriesSoonWhileEventsWaitForTheHorizon) {
  using namespace std::chrono_literals;
  const std::chrono::steady_clock::time_point t0{};
  wake_schedule s(1000ms, retry::backoff{2ms, 50ms}, t0);
  s.read(t0, true);
  EXPECT_EQ(s.due(), t0 + 2ms);
  s.read(t0 + 1ms, true);  // another round before the retry: the retry stays
  EXPECT_EQ(s.due(), t0 + 2ms);
  s.woken(t0 + 2ms);  // the retry (or a notification) wakes; the next read decides again
  EXPECT_EQ(s.due(), t0 + 1002ms);
  s.read(t0 + 3ms, true);  // still pending: the pause doubles
  EXPECT_EQ(s.due(), t0 + 7ms);
  s.woken(t0 + 7ms);
  s.read(t0 + 8ms, false);  // passed: the pauses start over
  s.read(t0 + 9ms, true);
  EXPECT_EQ(s.due(), t0 + 11ms);
  for (int i = 0; i < 10; ++i) {
    s.woken(t0 + 20ms);
    s.read(t0 + 20ms, true);
  }
  EXPECT_EQ(s.due(), t0 + 70ms);  // at most the maximum pause
}

TEST(Retention, CursorsCompareByTransactionNumberThenId) {
  EXPECT_EQ(compare(cursor{"9", 50}, cursor{"10", 1}), std::strong_ordering::less);  // 9 < 10, not as text
  EXPECT_EQ(compare(cursor{"10", 2}, cursor{"10", 1}), std::strong_ordering::greater);
  EXPECT_EQ(compare(cursor{"4294967297", 7}, cursor{"4294967297", 7}), std::strong_ordering::equal);
  EXPECT_THROW((void)compare(cursor{"12a", 1}, cursor{"1", 1}), std::invalid_argument);
}

TEST(Retention, TheBoundIsTheLowestCursor) {
  const std::vector<consumer_position> consumers{
      {"projection", cursor{"120", 40}}, {"push:g0", cursor{"99", 70}}, {"push:g1", cursor{"120", 3}}};
  const auto bound = prune_bound(consumers);
  ASSERT_TRUE(bound);
  EXPECT_EQ(bound->tx_id, "99");
  EXPECT_EQ(bound->id, 70);
}

TEST(Retention, AConsumerThatDeliveredNothingHoldsEverything) {
  const std::vector<consumer_position> consumers{{"projection", cursor{"120", 40}}, {"push:g0", std::nullopt}};
  EXPECT_FALSE(prune_bound(consumers));
  EXPECT_FALSE(prune_bound({}));  // no consumer yet: nobody said what it delivered
}

// Whether a consumer's sink must forget its source: only a cursor read on
// another timeline than the source's now (a promotion since).
TEST(SourceHistory, ChangesWithTheTimelineOnly) {
  saved_cursor c;
  c.source_timeline = 2;
  EXPECT_FALSE(source_history_changed(c)) << "nothing saved yet";
  c.timeline = 2;
  EXPECT_FALSE(source_history_changed(c));
  c.timeline = 1;
  EXPECT_TRUE(source_history_changed(c));
  c.timeline = 3;  // a cursor saved on a later timeline than the server's: an old primary came back as one
  EXPECT_TRUE(source_history_changed(c));
}

TEST(ProjectionTtl, OnlySettledSagasExpireCountedFromTheirEvent) {
  using std::chrono::milliseconds;
  const milliseconds day{86400000};
  EXPECT_EQ(projection_ttl_ms(false, 1000, 5000, day), 0);  // an account, a saga still running
  EXPECT_EQ(projection_ttl_ms(true, 1000, 5000, day), 86400000 - 4000);
  EXPECT_EQ(projection_ttl_ms(true, 1000, 1000 + 86400000, day), -1);  // delivered (or rebuilt) too late: removed
  EXPECT_EQ(projection_ttl_ms(true, 1000, 1000 + 86399999, day), 1);
  EXPECT_EQ(projection_ttl_ms(true, 1000, 5000, milliseconds{0}), 0);  // 0: projections never expire
}

}  // namespace
}  // namespace tally::relay
