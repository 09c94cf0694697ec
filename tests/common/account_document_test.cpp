// The account document's forms: each a named conversion of one type.
#include "common/contract/account_document.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tally::contract {
namespace {

using json = nlohmann::json;

const account_document alice{"t1", "alice", 100, 30, "active", 7, 1798761600000, 40};

TEST(AccountDocument, TheEventCarriesTheTenantAndTheCause) {
  EXPECT_EQ(event_payload(alice, {"credit", "sg_1"}), json::parse(R"({"tenant":"t1","account_id":"alice",
    "balance":100,"held":30,"available":70,"status":"active","version":7,
    "next_expiry":{"at":"2027-01-01T00:00:00.000Z","amount":40},"cause":{"type":"credit","biz_id":"sg_1"}})"));
}

TEST(AccountDocument, AnEventNoCommandCausedCarriesNoCause) {
  EXPECT_EQ(event_payload(alice), json::parse(R"({"tenant":"t1","account_id":"alice","balance":100,"held":30,
    "available":70,"status":"active","version":7,"next_expiry":{"at":"2027-01-01T00:00:00.000Z","amount":40}})"));
}

TEST(AccountDocument, ThePublicFormHasItsTimeAndNoTenant) {
  auto never = alice;
  never.next_expiry_at.reset();
  EXPECT_EQ(public_json(never, 1764583200123), json::parse(R"({"account_id":"alice","balance":100,"held":30,
    "available":70,"status":"active","version":7,"next_expiry":null,"updated_at":"2025-12-01T10:00:00.123Z"})"));
  auto internal = internal_json(never, 1764583200123);
  EXPECT_EQ(internal["tenant"], "t1");
  internal.erase("tenant");
  EXPECT_EQ(internal, public_json(never, 1764583200123));
}

TEST(AccountDocument, AnEventsPayloadBecomesThePublicFormAtItsTime) {
  EXPECT_EQ(public_from_payload(event_payload(alice, {"debit", "sg_2"}), 1764583200123),
            public_json(alice, 1764583200123));
  EXPECT_FALSE(public_from_payload(json::array({1}), 0));
}

}  // namespace
}  // namespace tally::contract
