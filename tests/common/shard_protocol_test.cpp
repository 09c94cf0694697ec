// The shard protocol's messages through their one encoder and decoder, and
// every enum table's names in both directions.
#include "common/contract/shard_protocol.hpp"

#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/contract/errors.hpp"
#include "common/contract/saga_type.hpp"

namespace tally::contract {
namespace {

using json = nlohmann::json;
using kind = shard_command_kind;
using status = shard_reply_status;

// One command of each kind, with every field its kind takes.
std::vector<shard_command> one_of_each_kind() {
  auto make = [](kind k) {
    shard_command c;
    c.kind = k;
    c.tenant = "t1";
    c.account_id = "alice";
    c.biz_id = "sg_1";
    return c;
  };
  std::vector<shard_command> out;
  out.push_back(make(kind::open_account));
  auto credit = make(kind::credit);
  credit.amount = 30;
  credit.memo = "gift";
  credit.expires_at = 1798761600000;
  credit.rule_version = "r2";
  out.push_back(credit);
  auto split = make(kind::credit);
  split.amount = 30;
  split.lots = {{0, 20, 1798761600000, "a"}, {0, 10, std::nullopt, "1"}};
  out.push_back(split);
  for (auto k : {kind::debit, kind::hold}) {
    auto c = make(k);
    c.amount = 7;
    c.memo = "m";
    out.push_back(c);
  }
  auto capture = make(kind::capture);
  capture.amount = 5;
  out.push_back(capture);
  out.push_back(make(kind::capture));  // the whole hold
  out.push_back(make(kind::release));
  auto refund = make(kind::refund);
  refund.target_type = "capture";
  refund.target_id = "sg_0";
  out.push_back(refund);  // what is left of the original
  auto cancel = make(kind::cancel_key);
  cancel.biz_id.clear();
  cancel.target_type = "credit";
  cancel.target_id = "sg_1";
  out.push_back(cancel);
  auto expire = make(kind::expire);
  expire.biz_id = "12";
  out.push_back(expire);
  return out;
}

TEST(ShardCommand, EveryKindReadsBackAsItWasWritten) {
  for (const auto& c : one_of_each_kind()) {
    const auto wire = to_json(c);
    auto back = parse_shard_command(json::parse(wire.dump()));
    ASSERT_TRUE(std::holds_alternative<shard_command>(back)) << wire.dump() << ": " << std::get<std::string>(back);
    EXPECT_EQ(std::get<shard_command>(back), c) << wire.dump();
  }
}

TEST(ShardCommand, TheWireFormIsTheOneBothSidesAlwaysSpoke) {
  const auto all = one_of_each_kind();
  EXPECT_EQ(to_json(all[1]), json::parse(R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"sg_1",
    "amount":30,"memo":"gift","expires_at":"2027-01-01T00:00:00.000Z","rule_version":"r2"})"));
  EXPECT_EQ(to_json(all[2]), json::parse(R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"sg_1",
    "amount":30,"lots":[{"amount":20,"expires_at":"2027-01-01T00:00:00.000Z","rule_version":"a"},
    {"amount":10,"rule_version":"1"}]})"));
  EXPECT_EQ(to_json(all[6]), json::parse(R"({"type":"capture","tenant":"t1","account_id":"alice","biz_id":"sg_1"})"));
  EXPECT_EQ(to_json(all[9]), json::parse(R"({"type":"cancel_key","tenant":"t1","account_id":"alice",
    "target_type":"credit","target_id":"sg_1"})"));
  EXPECT_EQ(to_json(open_account_command("t1", "bob")),
            json::parse(R"({"type":"open_account","tenant":"t1","account_id":"bob"})"));
}

TEST(ShardCommand, AFieldItsKindDoesNotTakeIsRefused) {
  auto refused = [](const char* text) {
    auto r = parse_shard_command(json::parse(text));
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string();
  };
  EXPECT_EQ(refused(R"({"type":"release","tenant":"t1","account_id":"a","biz_id":"h","amount":3})"),
            "unknown field: amount");
  EXPECT_EQ(refused(R"({"type":"transfer","tenant":"t1","account_id":"a"})"), "unknown command type: transfer");
  EXPECT_EQ(refused(R"({"tenant":"t1","account_id":"a"})"), "missing field: type");
  EXPECT_EQ(refused(R"({"type":"refund","tenant":"t1","account_id":"a","biz_id":"r","original_type":"credit",
    "original_id":"c"})"),
            "original_type must be debit or capture");
}

// One reply of each status, with the fields its status carries.
std::vector<shard_reply> one_of_each_status() {
  std::vector<shard_reply> out;
  shard_reply done;
  done.kind = kind::hold;
  done.biz_id = "sg_1";
  done.amount = 30;
  done.balance_after = 100;
  done.held_after = 30;
  done.version = 4;
  done.ledger_seq = 17;
  done.lots = {{3, 20, 1798761600000, "a"}, {1, 10, std::nullopt, "1"}};
  out.push_back(done);
  shard_reply replayed = done;
  replayed.replayed = true;
  replayed.lots.clear();
  replayed.ledger_seq.reset();
  out.push_back(replayed);
  shard_reply rejected = replayed;
  rejected.status = status::rejected;
  rejected.code = shard_code::insufficient_funds;
  out.push_back(rejected);
  for (auto [s, code] : {std::pair{status::conflict, shard_code::idempotency_conflict},
                         std::pair{status::retry, shard_code::hold_not_found}}) {
    shard_reply r;
    r.status = s;
    r.code = code;
    r.kind = kind::capture;
    r.biz_id = "sg_2";
    out.push_back(r);
  }
  shard_reply cancelled;
  cancelled.status = status::cancelled;
  cancelled.kind = kind::cancel_key;
  cancelled.biz_id = "sg_3";
  cancelled.replayed = true;
  out.push_back(cancelled);
  shard_reply applied = replayed;
  applied.status = status::already_applied;
  applied.kind = kind::cancel_key;
  applied.applied = applied_outcome{operation_state::rejected, 0, shard_code::account_closed};
  out.push_back(applied);
  out.push_back(unavailable_reply(shard_code::unavailable));
  out.push_back(unavailable_reply(shard_code::outcome_unknown));
  out.push_back(unavailable_reply(shard_code::account_busy, 25));
  return out;
}

TEST(ShardReply, EveryStatusReadsBackAsItWasWritten) {
  std::set<status> seen;
  for (const auto& r : one_of_each_status()) {
    const auto wire = to_json_text(r);
    auto back = parse_shard_reply(json::parse(wire));
    ASSERT_TRUE(std::holds_alternative<shard_reply>(back)) << wire << ": " << std::get<std::string>(back);
    EXPECT_EQ(std::get<shard_reply>(back), r) << wire;
    seen.insert(r.status);
  }
  EXPECT_EQ(seen.size(), shard_reply_status_names.size()) << "a status without a round trip";
}

TEST(ShardReply, TheWireFormIsTheOneBothSidesAlwaysSpoke) {
  const auto all = one_of_each_status();
  EXPECT_EQ(json::parse(to_json_text(all[0])), json::parse(R"({"status":"succeeded","command":"hold","biz_id":"sg_1",
    "replayed":false,"amount":30,"balance_after":100,"held_after":30,"version":4,"ledger_seq":17,"lots":[
    {"lot_id":3,"amount":20,"expires_at":"2027-01-01T00:00:00.000Z","rule_version":"a"},
    {"lot_id":1,"amount":10,"expires_at":null,"rule_version":"1"}]})"));
  EXPECT_EQ(json::parse(to_json_text(all[3])),
            json::parse(R"({"status":"conflict","code":"idempotency_conflict","command":"capture","biz_id":"sg_2"})"));
  EXPECT_EQ(json::parse(to_json_text(all[9])),
            json::parse(R"({"status":"unavailable","code":"account_busy","retry_after_ms":25})"));
  EXPECT_EQ(json::parse(to_json_text(all[7])), json::parse(R"({"status":"unavailable","code":"unavailable"})"));
}

TEST(ShardReply, AnUnknownStatusKindOrCodeIsNoReply) {
  for (const char* text : {R"({"status":"maybe"})", R"({"code":"x"})", R"({"status":1})", R"([])",
                           R"({"status":"rejected","code":"new_code"})", R"({"status":"succeeded","command":"x"})",
                           R"({"status":"succeeded","amount":"30"})", R"({"status":"already_applied"})",
                           R"({"status":"already_applied","applied":{"state":"maybe"}})",
                           R"({"status":"succeeded","lots":[{"amount":1,"expires_at":"tomorrow"}]})"})
    EXPECT_TRUE(std::holds_alternative<std::string>(parse_shard_reply(json::parse(text)))) << text;
}

enum class probe { a, b, c };

TEST(EnumNames, ATableMissingAValueOrNamingOneTwiceIsCaught) {
  constexpr enum_names<probe, 2> missing{{{probe::a, "a"}, {probe::b, "b"}}};
  constexpr enum_names<probe, 3> twice{{{probe::a, "a"}, {probe::b, "a"}, {probe::c, "c"}}};
  constexpr enum_names<probe, 3> beyond{{{probe::a, "a"}, {probe::b, "b"}, {static_cast<probe>(5), "c"}}};
  constexpr enum_names<probe, 3> full{{{probe::a, "a"}, {probe::b, "b"}, {probe::c, "c"}}};
  EXPECT_FALSE(names_every_value(missing));
  EXPECT_FALSE(names_every_value(twice));
  EXPECT_FALSE(names_every_value(beyond));
  EXPECT_TRUE(names_every_value(full));
}

TALLY_NAMED_ENUM(listed_probe,
                 first,  // a comment is no name
                 second_one, third);

TEST(EnumNames, ANamedEnumIsNamedAsItsListIsWritten) {
  static_assert(listed_probe_names.size() == 3);
  EXPECT_EQ(name_of(listed_probe_names, listed_probe::first), "first");
  EXPECT_EQ(name_of(listed_probe_names, listed_probe::second_one), "second_one");
  EXPECT_EQ(to_string(listed_probe::third), "third");
  EXPECT_EQ(tally::contract::detail::count_listed("a,\n b ,c,"), 3u);
}

template <class E, std::size_t N>
void expect_both_ways(const enum_names<E, N>& names) {
  EXPECT_TRUE(names_every_value(names));
  for (const auto& [value, name] : names) {
    EXPECT_EQ(name_of(names, value), name);
    EXPECT_EQ(value_of(names, name), value) << name;
  }
  EXPECT_EQ(value_of(names, "no_such_name"), std::nullopt);
}

TEST(EnumNames, EveryContractTableGoesBothWays) {
  expect_both_ways(shard_command_kind_names);
  expect_both_ways(shard_code_names);
  expect_both_ways(shard_reply_status_names);
  expect_both_ways(operation_state_names);
  expect_both_ways(saga_type_names);
  expect_both_ways(saga_collections);
  expect_both_ways(error_code_names);
}

}  // namespace
}  // namespace tally::contract
