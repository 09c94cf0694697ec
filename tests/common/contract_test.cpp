// The public contract as types: saga ids (the ULID layout, checked against
// values computed independently in Python, time order, the shards'
// alphabet), the saga types' names, the canonical form of a saga request,
// error codes and their statuses.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/contract/errors.hpp"
#include "common/contract/saga_id.hpp"
#include "common/contract/saga_request.hpp"
#include "common/validate/fields.hpp"

namespace tally::contract {
namespace {

using instant = std::chrono::sys_time<std::chrono::milliseconds>;
using json = nlohmann::json;

const instant t{std::chrono::milliseconds(1'764'583'200'123)};

TEST(SagaId, MatchesTheUlidLayout) {
  EXPECT_EQ(new_saga_id(instant{}, {}), "sg_00000000000000000000000000");
  std::array<std::uint8_t, 10> ones;
  ones.fill(0xff);
  EXPECT_EQ(new_saga_id(t, ones), "sg_01KBCNNNBVZZZZZZZZZZZZZZZZ");
  EXPECT_EQ(new_saga_id(t, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), "sg_01KBCNNNBV041061050R3GG28A");
}

TEST(SagaId, SortsByCreationTimeAndFitsTheShardIds) {
  std::array<std::uint8_t, 10> high;
  high.fill(0xff);
  const auto earlier = new_saga_id(t, high);
  const auto later = new_saga_id(t + std::chrono::milliseconds(1), {});
  EXPECT_LT(earlier, later);
  EXPECT_TRUE(validate::is_valid_id(later));
  EXPECT_TRUE(is_saga_id(earlier));
  EXPECT_TRUE(is_saga_id(later));
}

TEST(SagaId, RecognisesOnlyItsOwnShape) {
  EXPECT_FALSE(is_saga_id(""));
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000"));  // 25 characters
  EXPECT_FALSE(is_saga_id("xx_00000000000000000000000000"));
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000I"));  // not Crockford
  EXPECT_FALSE(is_saga_id("sg_80000000000000000000000000"));  // more than 128 bits
  EXPECT_FALSE(is_saga_id("sg_0000000000000000000000000a"));  // lower case
}

TEST(SagaType, NamesAndCollectionsGoBothWays) {
  for (auto type : all_saga_types) {
    EXPECT_EQ(saga_type_from(to_string(type)), type);
    EXPECT_EQ(saga_type_of_collection(collection_of(type)), type);
  }
  EXPECT_EQ(collection_of(saga_type::batch_deduct), "batch-deductions");
  EXPECT_EQ(to_string(saga_type::batch_deduct), "batch_deduct");
  EXPECT_FALSE(saga_type_from("batch-deductions"));
  EXPECT_FALSE(saga_type_of_collection("batch_deduct"));
  EXPECT_FALSE(saga_type_of_collection("accounts"));
  EXPECT_TRUE(is_refundable(saga_type::transfer));
  EXPECT_FALSE(is_refundable(saga_type::refund));
  EXPECT_FALSE(is_refundable(saga_type::credit));
}

saga_request parsed(saga_type type, const json& body) {
  auto r = parse_saga_request(type, "t1", body);
  if (auto* bad = std::get_if<invalid_request>(&r)) ADD_FAILURE() << bad->message << " for " << body.dump();
  return std::holds_alternative<saga_request>(r) ? std::get<saga_request>(r) : saga_request{};
}

TEST(SagaRequest, TheCanonicalFormReadsBackAsTheSameRequest) {
  const saga_request every[] = {
      parsed(saga_type::credit, {{"account_id", "a"},
                                 {"amount", 5},
                                 {"biz_id", "c-1"},
                                 {"memo", "hi"},
                                 {"expires_at", "2027-01-31T00:00:00.250Z"},
                                 {"rule_version", "2"}}),
      parsed(saga_type::deduct, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "d-1"}, {"hold_timeout_ms", 900}}),
      parsed(saga_type::refund, {{"original_saga_id", "sg_01X"}, {"biz_id", "r-1"}, {"account_id", "s2"}}),
      parsed(saga_type::transfer,
             {{"from_account", "a"}, {"to_account", "b"}, {"amount", 3}, {"biz_id", "t-1"}, {"timeout_ms", 1500}}),
      parsed(saga_type::batch_deduct,
             {{"biz_id", "b-1"},
              {"items", {{{"account_id", "s1"}, {"amount", 1}}, {{"account_id", "s2"}, {"amount", 2}}}}}),
  };
  for (const auto& r : every) {
    EXPECT_EQ(r.request_hash.size(), 64u);
    auto back = from_canonical_json(json::parse(to_canonical_json(r).dump()));
    ASSERT_TRUE(back) << to_canonical_json(r).dump();
    EXPECT_EQ(*back, r) << to_canonical_json(r).dump();
  }
  EXPECT_EQ(every[0].expires_at, 1801353600250);  // computed with Python's datetime
  EXPECT_EQ(every[1].hold_timeout, std::chrono::milliseconds(900));
  EXPECT_EQ(every[3].timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(accounts_of(every[3]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(accounts_of(every[4]), (std::vector<std::string>{"s1", "s2"}));
}

TEST(SagaRequest, ACanonicalFormOfTheWrongShapeIsRefused) {
  auto good = to_canonical_json(parsed(saga_type::credit, {{"account_id", "a"}, {"amount", 5}, {"biz_id", "c-1"}}));
  ASSERT_TRUE(from_canonical_json(good));
  EXPECT_FALSE(from_canonical_json(json::array()));
  for (const char* field : {"type", "tenant", "biz_id", "amount", "request_hash"}) {
    auto without = good;
    without.erase(field);
    EXPECT_FALSE(from_canonical_json(without)) << field;
  }
  auto bad_type = good;
  bad_type["type"] = "credits";
  EXPECT_FALSE(from_canonical_json(bad_type));
  auto bad_amount = good;
  bad_amount["amount"] = "5";
  EXPECT_FALSE(from_canonical_json(bad_amount));
  auto bad_items = good;
  bad_items["items"] = {{{"account_id", 7}, {"amount", 1}}};
  EXPECT_FALSE(from_canonical_json(bad_items));
}

TEST(SagaAction, TakesNoBodyOrAnEmptyObject) {
  for (const char* body : {"", " \r\n", "{}", " { } "}) EXPECT_FALSE(check_action_body(body)) << body;
  for (const char* body : {"{", "[]", "null", "\"{}\"", "{}{}", R"({"amount":1})", R"({"":null})"})
    EXPECT_TRUE(check_action_body(body)) << body;
}

TEST(Errors, EachCodeHasItsStatus) {
  EXPECT_EQ(http_status(error_code::invalid_request), 400u);
  EXPECT_EQ(http_status(error_code::payload_too_large), 413u);
  EXPECT_EQ(http_status(error_code::idempotency_conflict), 422u);
  EXPECT_EQ(http_status(error_code::unavailable), 503u);
  EXPECT_EQ(http_status(error_code::account_busy), 429u);
  EXPECT_EQ(to_string(error_code::account_busy), "account_busy");
  for (const auto& [code, name] : error_code_names) {
    EXPECT_EQ(to_string(code), name);
    EXPECT_GE(http_status(code), 400u);
  }
}

}  // namespace
}  // namespace tally::contract
