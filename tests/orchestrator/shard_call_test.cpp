// The engine's calls in the shard's wire form, and the shard's replies as
// the engine's answers.
#include "orchestrator/transport/shard_call.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tally::orch {
namespace {

using json = nlohmann::json;

// A call as its command goes out on the wire.
json wire(const outgoing_call& c, std::string_view tenant) { return contract::to_json(shard_command(c, tenant)); }

// The command of a call(op) of `type`: to alice under sg_1 for t1, with any
// `fields` besides.
json command_of(const char* type, const json& fields = json::object()) {
  json c{{"type", type}, {"tenant", "t1"}, {"account_id", "alice"}, {"biz_id", "sg_1"}};
  c.update(fields);
  return c;
}

outgoing_call call(participant_op op) {
  outgoing_call c;
  c.op = op;
  c.account = "alice";
  c.biz_id = "sg_1";
  c.amount = 30;
  return c;
}

TEST(ShardCommand, ACreditCarriesItsLotFields) {
  auto expiring = call(participant_op::credit);
  expiring.expires_at = 1798761600000;
  expiring.rule_version = "r2";
  EXPECT_EQ(wire(expiring, "t1"),
            command_of("credit", {{"amount", 30}, {"expires_at", "2027-01-01T00:00:00.000Z"}, {"rule_version", "r2"}}));
  auto split = call(participant_op::credit);
  split.lots = {{20, 1798761600000, "a"}, {10, std::nullopt, "1"}};
  EXPECT_EQ(
      wire(split, "t1"),
      command_of(
          "credit",
          {{"amount", 30},
           {"lots", json::array({{{"amount", 20}, {"expires_at", "2027-01-01T00:00:00.000Z"}, {"rule_version", "a"}},
                                 {{"amount", 10}, {"rule_version", "1"}}})}}));
}

TEST(ShardAnswer, ASucceededReplyCarriesItsLots) {
  auto a = answer_from_result(json::parse(R"({"status":"succeeded","command":"hold","lots":[
    {"lot_id":3,"amount":20,"expires_at":"2027-01-01T00:00:00.000Z","rule_version":"a"},
    {"lot_id":1,"amount":10,"expires_at":null,"rule_version":"1"}]})"));
  EXPECT_EQ(a.kind, answer_kind::succeeded);
  EXPECT_EQ(a.lots, (std::vector<lot_share>{{20, 1798761600000, "a"}, {10, std::nullopt, "1"}}));
}

TEST(ShardAnswer, TheAmountMovedComesBackApplied) {
  EXPECT_EQ(answer_from_result(json::parse(R"({"status":"succeeded","command":"refund","amount":25})")).amount, 25);
  auto applied =
      answer_from_result(json::parse(R"({"status":"already_applied","applied":{"state":"succeeded","amount":7}})"));
  EXPECT_EQ(applied.kind, answer_kind::already_applied_succeeded);
  EXPECT_EQ(applied.amount, 7);
}

TEST(ShardCommand, EachOpCarriesItsFieldsOnly) {
  auto credit = call(participant_op::credit);
  credit.memo = "gift";
  EXPECT_EQ(wire(credit, "t1"), command_of("credit", {{"amount", 30}, {"memo", "gift"}}));
  EXPECT_EQ(wire(call(participant_op::debit), "t1"), command_of("debit", {{"amount", 30}}));
  EXPECT_EQ(wire(call(participant_op::hold), "t1"), command_of("hold", {{"amount", 30}}));
  auto capture = call(participant_op::capture);
  capture.amount = 0;  // the whole hold
  EXPECT_EQ(wire(capture, "t1"), command_of("capture"));
  EXPECT_EQ(wire(call(participant_op::release), "t1"), command_of("release"));
  auto refund = call(participant_op::refund);
  refund.original_type = "capture";
  refund.original_id = "sg_0";
  EXPECT_EQ(wire(refund, "t1"),
            command_of("refund", {{"amount", 30}, {"original_type", "capture"}, {"original_id", "sg_0"}}));
  refund.amount = 0;  // what is left of the original
  EXPECT_EQ(wire(refund, "t1"), command_of("refund", {{"original_type", "capture"}, {"original_id", "sg_0"}}));
  outgoing_call cancel;
  cancel.op = participant_op::cancel_key;
  cancel.account = "bob";
  cancel.target_type = "credit";
  cancel.target_id = "sg_1";
  EXPECT_EQ(wire(cancel, "t1"), (json{{"type", "cancel_key"},
                                      {"tenant", "t1"},
                                      {"account_id", "bob"},
                                      {"target_type", "credit"},
                                      {"target_id", "sg_1"}}));
}

TEST(ShardAnswer, EveryReplyStatusMapsToOneAnswer) {
  auto kind = [](const json& j) { return answer_from_result(j).kind; };
  EXPECT_EQ(kind({{"status", "succeeded"}, {"replayed", true}}), answer_kind::succeeded);
  auto r = answer_from_result({{"status", "rejected"}, {"code", "insufficient_funds"}});
  EXPECT_EQ(r.kind, answer_kind::rejected);
  EXPECT_EQ(r.code, "insufficient_funds");
  EXPECT_EQ(kind({{"status", "conflict"}, {"code", "idempotency_conflict"}}), answer_kind::conflict);
  EXPECT_EQ(kind({{"status", "cancelled"}}), answer_kind::cancelled);
  auto retry = answer_from_result({{"status", "retry"}, {"code", "account_frozen"}});
  EXPECT_EQ(retry.kind, answer_kind::retry);
  EXPECT_EQ(retry.code, "account_frozen");
  EXPECT_EQ(kind({{"status", "already_applied"}, {"applied", {{"state", "succeeded"}, {"amount", 30}}}}),
            answer_kind::already_applied_succeeded);
  auto other = answer_from_result(
      {{"status", "already_applied"}, {"applied", {{"state", "rejected"}, {"code", "account_not_found"}}}});
  EXPECT_EQ(other.kind, answer_kind::already_applied_other);
  EXPECT_EQ(other.code, "account_not_found");
  EXPECT_EQ(answer_from_result({{"status", "already_applied"}, {"applied", {{"state", "cancelled"}}}}).code,
            "cancelled");
}

TEST(ShardAnswer, ABusyAccountIsARetryAfterTheShardsPauseAndOtherUnavailablesAreUnknown) {
  auto busy = answer_from_result({{"status", "unavailable"}, {"code", "account_busy"}, {"retry_after_ms", 25}});
  EXPECT_EQ(busy.kind, answer_kind::retry);
  EXPECT_EQ(busy.code, "account_busy");
  EXPECT_EQ(busy.retry_after, std::chrono::milliseconds(25));
  auto no_pause = answer_from_result({{"status", "unavailable"}, {"code", "account_busy"}});
  EXPECT_EQ(no_pause.kind, answer_kind::retry);
  EXPECT_EQ(no_pause.retry_after, std::chrono::milliseconds(0));
  auto capped =
      answer_from_result({{"status", "unavailable"}, {"code", "account_busy"}, {"retry_after_ms", 1'000'000'000}});
  EXPECT_EQ(capped.retry_after, std::chrono::milliseconds(60'000));
  for (const char* code : {"unavailable", "outcome_unknown"}) {
    auto r = answer_from_result({{"status", "unavailable"}, {"code", code}});
    EXPECT_EQ(r.kind, answer_kind::transport) << code;
    EXPECT_EQ(r.code, code);
  }
}

TEST(ShardAnswer, AnythingUnreadableIsAnUnknownOutcome) {
  for (const json& j :
       {json(nullptr), json::array(), json{{"code", "x"}}, json{{"status", 1}}, json{{"status", "maybe"}},
        json{{"status", "already_applied"}},
        // A known status with a field it cannot read: no answer rather than a guess.
        json{{"status", "succeeded"}, {"amount", "x"}}, json{{"status", "rejected"}, {"code", "new_code"}},
        json{{"status", "unavailable"}, {"code", "account_busy"}, {"retry_after_ms", 2.5}},
        json{{"status", "succeeded"}, {"command", "transfer"}}})
    EXPECT_EQ(answer_from_result(j).kind, answer_kind::transport) << j.dump();
  EXPECT_EQ(answer_from_status(503).code, "unavailable");
  EXPECT_EQ(answer_from_status(0).code, "no_reply");
  EXPECT_EQ(answer_from_status(400).code, "batch_refused");
  EXPECT_EQ(answer_from_status(500).code, "http_500");
  EXPECT_EQ(answer_from_status(503).kind, answer_kind::transport);
}

}  // namespace
}  // namespace tally::orch
