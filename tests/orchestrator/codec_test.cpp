// A saga's JSON forms: the stored one must round-trip exactly at every point
// of a saga's life; the public one must say what API.md says.
#include "orchestrator/saga/codec.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/orchestrator/sagas.hpp"

namespace tally::orch {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using namespace testing;

const instant t0{std::chrono::milliseconds(1'764'583'200'123)};

// What the store keeps in columns, plus the stored JSON, read back.
saga reloaded(const saga& s) {
  saga r;
  r.id = s.id;
  r.tenant = s.tenant;
  r.biz_id = s.biz_id;
  r.workflow = s.workflow;
  r.state = s.state;
  r.error = s.error;
  r.attention = s.attention;
  r.created = s.created;
  r.deadline = s.deadline;
  r.wake = s.wake;
  r.input = input_from_json(json::parse(input_to_json(s.input).dump()));
  std::string error;
  EXPECT_TRUE(progress_from_json(json::parse(progress_to_json(s).dump()), r, error)) << error;
  return r;
}

TEST(Rfc3339, UtcWithMilliseconds) {
  EXPECT_EQ(to_rfc3339(t0), "2025-12-01T10:00:00.123Z");
  EXPECT_EQ(to_rfc3339(instant{}), "1970-01-01T00:00:00.000Z");
}

TEST(StoredSaga, RoundTripsExactlyAfterEveryEvent) {
  auto e = engine_for("transfer");
  auto s = transfer_saga("sg_01CODEC");
  e.start(s, t0);
  EXPECT_EQ(reloaded(s), s);
  e.on_answer(s, {0, 0, false}, {answer_kind::succeeded, "", {{20, 5000, "p"}, {10, std::nullopt, "1"}}}, t0 + 5ms);
  ASSERT_EQ(s.calls[0][0].lots.size(), 2u);
  EXPECT_EQ(reloaded(s), s);
  e.on_answer(s, {1, 0, false}, {answer_kind::transport, "timeout"}, t0 + 20ms);
  EXPECT_EQ(reloaded(s), s);
  e.on_wake(s, t0 + 10s);  // compensating, cancel_key in flight
  auto r = reloaded(s);
  EXPECT_EQ(r, s);
  // The reloaded saga carries on exactly like the original.
  auto d1 = e.on_answer(s, {1, 0, true}, {answer_kind::cancelled, ""}, t0 + 10s + 5ms);
  auto d2 = e.on_answer(r, {1, 0, true}, {answer_kind::cancelled, ""}, t0 + 10s + 5ms);
  ASSERT_EQ(d1.send.size(), 1u);
  ASSERT_EQ(d2.send.size(), 1u);
  EXPECT_EQ(d2.send[0].op, d1.send[0].op);
  EXPECT_EQ(r, s);

  auto held = one_account("sg_01HELD", "carol", 5);
  held.input.hold_timeout = 60s;
  held.input.items = {{"x", 1}};  // every input field survives, used or not
  held.input.original_saga_id = "sg_0";
  held.input.original_type = "debit";
  held.input.original_key = "sg_0";
  held.input.memo = "m";
  held.input.expires_at = 1798761600000;
  held.input.rule_version = "r3";
  auto h = engine_for("deduct_held");
  h.start(held, t0);
  h.on_answer(held, {0, 0, false}, ok(), t0 + 1ms);
  ASSERT_TRUE(held.hold_deadline);
  EXPECT_EQ(reloaded(held), held);
}

TEST(StoredSaga, ARefundKeepsWhatItGaveBack) {
  auto e = engine_for("refund");
  auto s = one_account("sg_01REFUND", "erin", 0);
  e.start(s, t0);
  answer a{answer_kind::succeeded, ""};
  a.amount = 9;
  e.on_answer(s, {0, 0, false}, a, t0 + 1ms);
  ASSERT_EQ(s.calls[0][0].amount, 9);
  EXPECT_EQ(reloaded(s), s);
}

TEST(PublicSaga, ARefundSaysWhatItGaveBackAndAnOriginalPerItem) {
  const auto& w = *find_workflow("refund");
  auto e = engine_for("refund");
  auto s = one_account("sg_01REFUND", "s2", 0);
  s.input.original_saga_id = "sg_01BATCH";
  e.start(s, t0);
  auto j = public_json(s, w, t0);
  EXPECT_EQ(j["input"], (json{{"original_saga_id", "sg_01BATCH"}, {"account_id", "s2"}}));
  EXPECT_EQ(j["refunded"], (json{{"amount", 0}, {"items", json::array()}}));
  answer a{answer_kind::succeeded, ""};
  a.amount = 9;
  e.on_answer(s, {0, 0, false}, a, t0 + 1ms);
  j = public_json(s, w, t0);
  EXPECT_EQ(j["refunded"], (json{{"amount", 9}, {"items", {{{"account_id", "s2"}, {"amount", 9}}}}}));

  saga batch;
  batch.input.items = {{"s1", 10}, {"s2", 20}, {"s3", 5}};
  auto per_item = refunded_of_original(batch, saga_type::batch_deduct, {{"s2", 9}, {"s1", 1}, {"s2", 11}, {"x", 4}});
  EXPECT_EQ(per_item, (std::vector<saga_item>{{"s1", 1}, {"s2", 20}, {"s3", 0}}));
  EXPECT_EQ(refunded_json(per_item)["amount"], 21);
  auto transfer = transfer_saga();
  EXPECT_EQ(refunded_of_original(transfer, saga_type::transfer, {{"alice", 5}}),
            (std::vector<saga_item>{{"alice", 5}}));
  EXPECT_TRUE(refunded_of_original(transfer, saga_type::credit, {{"alice", 5}}).empty());
}

// A call writes only what differs from an idle call, and an idle undo not
// at all; documents written whole (before issue 28) read the same.
TEST(StoredSaga, WritesOnlyWhatDiffersFromAnIdleCallAndReadsTheWholeForm) {
  auto e = engine_for("transfer");
  auto s = transfer_saga("sg_01CODEC");
  e.start(s, t0);
  e.on_answer(s, {0, 0, false}, ok(), t0 + 5ms);
  auto j = progress_to_json(s);
  const auto& first = j["calls"][0][0];
  EXPECT_FALSE(first.contains("u")) << first;
  EXPECT_FALSE(first["f"].contains("c")) << first;
  EXPECT_EQ(j["calls"][2][0], (json{{"f", json::object()}})) << "an idle call is {}";

  auto whole = j;
  for (auto& step : whole["calls"])
    for (auto& call : step)
      for (const char* side : {"f", "u"}) {
        json full{{"s", "idle"}, {"n", 0}, {"c", ""}, {"d", 0}, {"t0", 0}, {"t1", 0}, {"dv", false}};
        if (call.contains(side)) full.update(call[side]);
        call[side] = full;
      }
  saga r;
  std::string error;
  ASSERT_TRUE(progress_from_json(whole, r, error)) << error;
  EXPECT_EQ(r.calls, s.calls);
  EXPECT_EQ(progress_to_json(r), j);
}

TEST(StoredSaga, RefusesWhatItDidNotWrite) {
  saga s;
  std::string error;
  EXPECT_FALSE(progress_from_json(json::object(), s, error));
  EXPECT_NE(error.find("unreadable"), std::string::npos);
  auto e = engine_for("transfer");
  auto t = transfer_saga("sg_01CODEC");
  e.start(t, t0);
  auto j = progress_to_json(t);
  auto bad_status = j;
  bad_status["calls"][0][0]["f"]["s"] = "maybe";
  EXPECT_FALSE(progress_from_json(bad_status, s, error));
  auto bad_cursor = j;
  bad_cursor["cursor"] = 3;
  EXPECT_FALSE(progress_from_json(bad_cursor, s, error));
}

TEST(PublicSaga, CompletedTransfer) {
  auto e = engine_for("transfer");
  auto s = transfer_saga("sg_01CODEC");
  e.start(s, t0);
  for (std::size_t step = 0; step < 3; ++step)
    e.on_answer(s, {step, 0, false}, ok(), t0 + std::chrono::milliseconds(step + 1));
  auto j = public_json(s, *find_workflow("transfer"), t0 + 3ms);
  EXPECT_EQ(j["saga_id"], "sg_01CODEC");
  EXPECT_EQ(j["type"], "transfer");
  EXPECT_EQ(j["biz_id"], "t-1");
  EXPECT_EQ(j["state"], "completed");
  EXPECT_EQ(j["input"], (json{{"from_account", "alice"}, {"to_account", "bob"}, {"amount", 30}}));
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_EQ(j["created_at"], "2025-12-01T10:00:00.123Z");
  EXPECT_EQ(j["updated_at"], "2025-12-01T10:00:00.126Z");
  EXPECT_EQ(j["deadline"], "2025-12-01T10:00:10.123Z");
  ASSERT_EQ(j["steps"].size(), 3u);
  EXPECT_EQ(j["steps"][0]["name"], "hold_source");
  EXPECT_EQ(j["steps"][0]["state"], "succeeded");
  EXPECT_EQ(j["steps"][0]["attempts"], 1);
  EXPECT_EQ(j["steps"][0]["started_at"], "2025-12-01T10:00:00.123Z");
  EXPECT_EQ(j["steps"][0]["finished_at"], "2025-12-01T10:00:00.124Z");
  EXPECT_EQ(j["steps"][2]["name"], "capture_source");
  EXPECT_EQ(j["steps"][2]["finished_at"], "2025-12-01T10:00:00.126Z");
}

TEST(PublicSaga, FailedTransferShowsWhatWasUndone) {
  auto e = engine_for("transfer");
  auto s = transfer_saga("sg_01CODEC");
  e.start(s, t0);
  e.on_answer(s, {0, 0, false}, ok(), t0 + 1ms);
  e.on_answer(s, {1, 0, false}, {answer_kind::rejected, "account_not_found"}, t0 + 2ms);
  auto mid = public_json(s, *find_workflow("transfer"), t0 + 2ms);
  EXPECT_EQ(mid["state"], "compensating");
  EXPECT_EQ(mid["steps"][0]["state"], "compensating");
  EXPECT_TRUE(mid["steps"][0]["finished_at"].is_null());
  e.on_answer(s, {0, 0, true}, ok(), t0 + 3ms);
  auto j = public_json(s, *find_workflow("transfer"), t0 + 3ms);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["error"]["code"], "account_not_found");
  EXPECT_EQ(j["error"]["message"], "step credit_destination was refused: account_not_found");
  EXPECT_EQ(j["steps"][0]["state"], "compensated");
  EXPECT_EQ(j["steps"][0]["attempts"], 2);  // the hold and its release
  EXPECT_EQ(j["steps"][1]["state"], "failed");
  EXPECT_EQ(j["steps"][1]["error"]["code"], "account_not_found");
  EXPECT_EQ(j["steps"][1]["error"]["message"], "the shard refused the call: account_not_found");
  EXPECT_TRUE(j["steps"][0]["error"].is_null());
  EXPECT_EQ(j["steps"][2]["state"], "pending");
  EXPECT_TRUE(j["steps"][2]["started_at"].is_null());
}

}  // namespace
}  // namespace tally::orch
