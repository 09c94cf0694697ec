// Saga requests: validation, the workflow each maps to, and the request hash.
#include "orchestrator/saga/request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tally::orch {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

saga_request ok(saga_type t, const json& body, std::string_view tenant = "t1") {
  auto r = saga_request_from_body(t, tenant, body);
  if (auto* bad = std::get_if<invalid_request>(&r)) ADD_FAILURE() << bad->message << " for " << body.dump();
  return std::holds_alternative<saga_request>(r) ? std::get<saga_request>(r) : saga_request{};
}

std::string refused(saga_type t, const json& body, std::string_view tenant = "t1") {
  auto r = saga_request_from_body(t, tenant, body);
  if (std::holds_alternative<saga_request>(r)) {
    ADD_FAILURE() << "accepted " << body.dump();
    return {};
  }
  return std::get<invalid_request>(r).message;
}

const json transfer_body = {{"from_account", "alice"}, {"to_account", "bob"}, {"amount", 30}, {"biz_id", "t-1"}};

TEST(SagaRequest, EachTypeMapsToItsWorkflowAndInput) {
  auto c = ok(saga_type::credit, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "c-1"}, {"memo", "hi"}});
  EXPECT_EQ(c.workflow, "credit");
  EXPECT_EQ(c.tenant, "t1");
  EXPECT_EQ(c.biz_id, "c-1");
  EXPECT_EQ(c.input.account, "a");
  EXPECT_EQ(c.input.amount, 5);
  EXPECT_EQ(c.input.memo, "hi");

  EXPECT_EQ(ok(saga_type::deduct, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "d-1"}}).workflow, "deduct");
  auto held = ok(saga_type::deduct, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "d-1"}, {"hold_timeout_ms", 900}});
  EXPECT_EQ(held.workflow, "deduct_held");
  EXPECT_EQ(held.input.hold_timeout, std::chrono::milliseconds(900));

  auto f = ok(saga_type::refund, {{"original_saga_id", "sg_01X"}, {"amount", 2}, {"biz_id", "r-1"}});
  EXPECT_EQ(f.workflow, "refund");
  EXPECT_EQ(f.input.original_saga_id, "sg_01X");

  auto t = ok(saga_type::transfer, transfer_body);
  EXPECT_EQ(t.workflow, "transfer");
  EXPECT_EQ(t.input.source, "alice");
  EXPECT_EQ(t.input.destination, "bob");
  EXPECT_FALSE(t.timeout);
  auto timed = transfer_body;
  timed["timeout_ms"] = 1500;
  EXPECT_EQ(ok(saga_type::transfer, timed).timeout, std::chrono::milliseconds(1500));

  auto b = ok(saga_type::batch_deduct,
              {{"biz_id", "class-7"},
               {"items", {{{"account_id", "s1"}, {"amount", 1}}, {{"account_id", "s2"}, {"amount", 2}}}}});
  EXPECT_EQ(b.workflow, "batch_deduct");
  ASSERT_EQ(b.input.items.size(), 2u);
  EXPECT_EQ(b.input.items[1].account, "s2");
  EXPECT_EQ(b.input.items[1].amount, 2);
}

TEST(SagaRequest, HashCoversTheSemanticFieldsOnly) {
  auto base = ok(saga_type::transfer, transfer_body).request_hash;
  EXPECT_EQ(base.size(), 64u);
  json reordered = {{"biz_id", "t-1"}, {"amount", 30}, {"to_account", "bob"}, {"from_account", "alice"}};
  EXPECT_EQ(ok(saga_type::transfer, reordered).request_hash, base);
  for (auto [field, value] : {std::pair<const char*, json>{"amount", 31},
                              {"to_account", "carol"},
                              {"from_account", "dave"},
                              {"timeout_ms", 1000}}) {
    auto changed = transfer_body;
    changed[field] = value;
    EXPECT_NE(ok(saga_type::transfer, changed).request_hash, base) << field;
  }
  EXPECT_NE(ok(saga_type::transfer, transfer_body, "t2").request_hash, base);
  // The same fields under another type are another request.
  auto c = ok(saga_type::credit, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "x"}});
  auto d = ok(saga_type::deduct, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "x"}});
  EXPECT_NE(c.request_hash, d.request_hash);
}

TEST(SagaRequest, ACreditsExpiryAndRuleVersionAreReadAndHashed) {
  const json plain{{"account_id", "a"}, {"amount", 5}, {"biz_id", "x"}};
  auto expiring = plain;
  expiring["expires_at"] = "2027-01-01T00:00:00.250Z";
  auto c = ok(saga_type::credit, expiring);
  EXPECT_EQ(c.input.expires_at, 1798761600250);
  EXPECT_NE(c.request_hash, ok(saga_type::credit, plain).request_hash);
  auto ruled = plain;
  ruled["rule_version"] = "promo-2";
  EXPECT_NE(ok(saga_type::credit, ruled).request_hash, ok(saga_type::credit, plain).request_hash);
  // The default rule version is the same request as none.
  ruled["rule_version"] = "1";
  EXPECT_EQ(ok(saga_type::credit, ruled).request_hash, ok(saga_type::credit, plain).request_hash);
  for (const json& bad : {json("2027-01-01"), json("2027-01-01T00:00:00+00:00"), json(1798761600), json(nullptr)}) {
    auto body = plain;
    body["expires_at"] = bad;
    EXPECT_THAT(refused(saga_type::credit, body), HasSubstr("expires_at must be an RFC 3339 UTC time")) << bad;
  }
  auto ruled_badly = plain;
  ruled_badly["rule_version"] = "no spaces";
  EXPECT_FALSE(refused(saga_type::credit, ruled_badly).empty());
}

TEST(SagaRequest, RefusesBadInputWithAReason) {
  EXPECT_EQ(refused(saga_type::credit, json::array()), "the body must be a JSON object");
  EXPECT_EQ(refused(saga_type::credit, {{"amount", 5}, {"biz_id", "c"}}), "missing field: account_id");
  EXPECT_EQ(refused(saga_type::credit, {{"account_id", "a b"}, {"amount", 5}, {"biz_id", "c"}}),
            "account_id must match [A-Za-z0-9._:-]{1,64}");
  for (json amount : {json(0), json(-1), json(1'000'000'000'000'001), json(1.5), json("5"), json(nullptr)})
    EXPECT_FALSE(refused(saga_type::credit, {{"account_id", "a"}, {"amount", amount}, {"biz_id", "c"}}).empty())
        << amount.dump();
  EXPECT_EQ(refused(saga_type::credit, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "c"}, {"trace", 1}}),
            "unknown field: trace");
  EXPECT_EQ(refused(saga_type::credit,
                    {{"account_id", "a"}, {"amount", 5}, {"biz_id", "c"}, {"memo", std::string(257, 'm')}}),
            "memo is too long");
  EXPECT_EQ(refused(saga_type::deduct, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "d"}, {"hold_timeout_ms", 0}}),
            "hold_timeout_ms must be between 1 and 604800000");
  auto same = transfer_body;
  same["to_account"] = "alice";
  EXPECT_EQ(refused(saga_type::transfer, same), "from_account and to_account must differ");
  auto slow = transfer_body;
  slow["timeout_ms"] = 300'001;
  EXPECT_EQ(refused(saga_type::transfer, slow), "timeout_ms must be between 1 and 300000");
  EXPECT_EQ(refused(saga_type::transfer, transfer_body, "bad tenant"), "tenant must match [A-Za-z0-9._:-]{1,64}");
}

TEST(SagaRequest, BatchItemsAreOneToAThousandDistinctAccounts) {
  auto items = [](std::size_t n) {
    json a = json::array();
    for (std::size_t i = 0; i < n; ++i) a.push_back({{"account_id", "s" + std::to_string(i)}, {"amount", 1}});
    return a;
  };
  EXPECT_EQ(ok(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", items(1000)}}).input.items.size(), 1000u);
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", items(0)}}),
            "items must hold 1 to 1000 entries");
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", items(1001)}}),
            "items must hold 1 to 1000 entries");
  auto twice = items(3);
  twice.push_back({{"account_id", "s1"}, {"amount", 4}});
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", twice}}),
            "items[3]: account s1 appears twice");
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", {1}}}), "items[0] must be an object");
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", {{{"account_id", "s"}, {"amount", 0}}}}}),
            "items[0]: amount must be between 1 and 10^15");
  EXPECT_EQ(
      refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", {{{"account_id", "s"}, {"amount", 1}, {"x", 1}}}}}),
      "items[0]: unknown field: x");
  EXPECT_EQ(refused(saga_type::batch_deduct, {{"biz_id", "b"}, {"items", "s1"}}), "items must be an array");
}

// ---- a refund against its original ----

saga completed(std::string workflow, saga_input in) {
  saga s;
  s.id = "sg_01ORIGINAL";
  s.tenant = "t1";
  s.workflow = std::move(workflow);
  s.state = saga_state::completed;
  s.input = std::move(in);
  return s;
}

saga batch_of(std::vector<saga_item> items) {
  saga_input in;
  in.items = std::move(items);
  return completed("batch_deduct", in);
}

// alice paid 50 (immediately, or held then captured).
saga deduction(std::string workflow = "deduct") {
  saga_input in;
  in.account = "alice";
  in.amount = 50;
  return completed(std::move(workflow), in);
}

saga_request refund_request(const json& extra) {
  json body = {{"original_saga_id", "sg_01ORIGINAL"}, {"biz_id", "r-1"}};
  body.update(extra);
  return ok(saga_type::refund, body);
}

TEST(RefundResolution, ABatchItemByAccountInFullOrInPart) {
  const auto batch = batch_of({{"s1", 10}, {"s2", 20}});
  auto one = refund_request({{"account_id", "s2"}});
  ASSERT_FALSE(resolve_refund(one, batch, saga_type::batch_deduct));
  EXPECT_EQ(one.workflow, "refund");
  EXPECT_EQ(one.input.account, "s2");
  EXPECT_EQ(one.input.amount, 0);  // what is left of it
  EXPECT_EQ(one.input.original_type, "capture");
  EXPECT_EQ(one.input.original_key, "sg_01ORIGINAL");

  auto part = refund_request({{"account_id", "s1"}, {"amount", 4}});
  ASSERT_FALSE(resolve_refund(part, batch, saga_type::batch_deduct));
  EXPECT_EQ(part.workflow, "refund");
  EXPECT_EQ(part.input.amount, 4);
}

TEST(RefundResolution, EveryBatchItemWithoutAnAccount) {
  auto all = refund_request(json::object());
  ASSERT_FALSE(resolve_refund(all, batch_of({{"s1", 10}, {"s2", 20}}), saga_type::batch_deduct));
  EXPECT_EQ(all.workflow, "revoke_items");
  EXPECT_EQ(all.input.items, (std::vector<saga_item>{{"s1", 0}, {"s2", 0}}));
  EXPECT_EQ(all.input.original_type, "capture");
}

TEST(RefundResolution, DeductionsAndTransfersAsBefore) {
  auto r = refund_request({{"amount", 5}});
  ASSERT_FALSE(resolve_refund(r, deduction(), saga_type::deduct));
  EXPECT_EQ(r.workflow, "refund");
  EXPECT_EQ(r.input.account, "alice");
  EXPECT_EQ(r.input.original_type, "debit");
  auto held = refund_request({{"amount", 5}, {"account_id", "alice"}});
  ASSERT_FALSE(resolve_refund(held, deduction("deduct_held"), saga_type::deduct));
  EXPECT_EQ(held.input.original_type, "capture");

  saga_input t;
  t.source = "alice";
  t.destination = "bob";
  t.amount = 30;
  auto back = refund_request({{"amount", 30}});
  ASSERT_FALSE(resolve_refund(back, completed("transfer", t), saga_type::transfer));
  EXPECT_EQ(back.workflow, "refund_transfer");
  EXPECT_EQ(back.input.account, "alice");
  EXPECT_EQ(back.input.source, "alice");
  EXPECT_EQ(back.input.destination, "bob");
}

TEST(RefundResolution, RefusalsSayWhy) {
  using reason = refund_refusal::reason;
  auto why = [](saga_request r, const saga& o, saga_type t) {
    auto refused = resolve_refund(r, o, t);
    return refused ? std::make_pair(refused->why, refused->message)
                   : std::make_pair(reason::invalid, std::string("none"));
  };
  const auto batch = batch_of({{"s1", 10}});
  EXPECT_EQ(why(refund_request({{"account_id", "s9"}}), batch, saga_type::batch_deduct),
            std::make_pair(reason::not_found, std::string("saga sg_01ORIGINAL has no item for account s9")));
  EXPECT_EQ(why(refund_request({{"amount", 3}}), batch, saga_type::batch_deduct).first, reason::invalid);
  auto running = batch;
  running.state = saga_state::running;
  EXPECT_EQ(why(refund_request(json::object()), running, saga_type::batch_deduct),
            std::make_pair(reason::invalid_state, std::string("the original saga has not completed")));

  EXPECT_EQ(why(refund_request(json::object()), deduction(), saga_type::deduct),
            std::make_pair(reason::invalid, std::string("amount is required to refund a deduction or a transfer")));
  EXPECT_EQ(why(refund_request({{"amount", 1}, {"account_id", "bob"}}), deduction(), saga_type::deduct).first,
            reason::not_found);
  EXPECT_EQ(why(refund_request({{"amount", 1}}), deduction("credit"), saga_type::credit).first, reason::invalid_state);
  EXPECT_EQ(why(refund_request({{"amount", 1}}), deduction("refund"), saga_type::refund).first, reason::invalid_state);
}

TEST(RefundResolution, TheHashIsWhatTheAppSent) {
  // Adding account_id and leaving out amount are new requests; a refund
  // as apps sent it before hashes as before.
  auto base = refund_request({{"amount", 5}}).request_hash;
  EXPECT_NE(refund_request({{"amount", 5}, {"account_id", "s1"}}).request_hash, base);
  EXPECT_NE(refund_request({{"account_id", "s1"}}).request_hash, refund_request({{"account_id", "s2"}}).request_hash);
  EXPECT_NE(refund_request(json::object()).request_hash, base);
  EXPECT_EQ(refused(saga_type::refund, {{"original_saga_id", "sg_0"}, {"biz_id", "r"}, {"account_id", "a b"}}),
            "account_id must match [A-Za-z0-9._:-]{1,64}");
}

}  // namespace
}  // namespace tally::orch
