// Unit tests of parse_command / request_hash (no I/O).
#include "account_shard/ledger/command.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/account_shard/parsed_command.hpp"

namespace {

using json = nlohmann::json;
using namespace tally::shard;
using tally::test::parsed;

// A valid command of each type, as the orchestrator would send it.
json valid(command_kind k) {
  switch (k) {
    case command_kind::open_account: return {{"type", "open_account"}, {"tenant", "t1"}, {"account_id", "a1"}};
    case command_kind::credit:
      return {{"type", "credit"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "c1"}, {"amount", 100}};
    case command_kind::debit:
      return {{"type", "debit"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "d1"}, {"amount", 80}};
    case command_kind::hold:
      return {{"type", "hold"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "h1"}, {"amount", 30}};
    case command_kind::capture: return {{"type", "capture"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "h1"}};
    case command_kind::release: return {{"type", "release"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "h1"}};
    case command_kind::refund:
      return {{"type", "refund"}, {"tenant", "t1"},           {"account_id", "a1"}, {"biz_id", "r1"},
              {"amount", 10},     {"original_type", "debit"}, {"original_id", "d1"}};
    case command_kind::cancel_key:
      return {{"type", "cancel_key"},
              {"tenant", "t1"},
              {"account_id", "a1"},
              {"target_type", "credit"},
              {"target_id", "c1"}};
    case command_kind::expire: return {{"type", "expire"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "3"}};
  }
  return {};
}

const command_kind all_kinds[] = {command_kind::open_account, command_kind::credit,     command_kind::debit,
                                  command_kind::hold,         command_kind::capture,    command_kind::release,
                                  command_kind::refund,       command_kind::cancel_key, command_kind::expire};

// The parse error's message, or "" (and a test failure) if it parsed.
std::string err(const json& j) {
  auto r = parse_command(j);
  if (auto* bad = std::get_if<invalid_command>(&r)) return bad->message;
  ADD_FAILURE() << "expected a parse error for " << j.dump();
  return "";
}

// The parse error of a valid command of kind `k` but for its `field` set to `value`.
std::string err_with(command_kind k, const std::string& field, const json& value) {
  json j = valid(k);
  j[field] = value;
  return err(j);
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// `c` is a command of kind `k` on account a1 of t1 under `biz_id`, for
// `amount`, keyed by its kind and business id.
void expect_command(const command& c, command_kind k, const std::string& biz_id, std::int64_t amount) {
  EXPECT_EQ(c.kind, k);
  EXPECT_EQ(c.tenant, "t1");
  EXPECT_EQ(c.account_id, "a1");
  EXPECT_EQ(c.biz_id, biz_id);
  EXPECT_EQ(c.amount, amount);
  EXPECT_EQ(c.key(), (op_key{"t1", "a1", std::string(to_string(k)), biz_id}));
}

TEST(ParseCommand, OpenAccountDefaultsBizIdToOpen) {
  command c = parsed(valid(command_kind::open_account));
  expect_command(c, command_kind::open_account, "open", 0);
  // An explicit "open" is the same command, so the same hash.
  json j = valid(command_kind::open_account);
  j["biz_id"] = "open";
  EXPECT_EQ(parsed(j).request_hash, c.request_hash);
  j["biz_id"] = "reopen-2";
  command c2 = parsed(j);
  EXPECT_EQ(c2.biz_id, "reopen-2");
  EXPECT_NE(c2.request_hash, c.request_hash);
}

TEST(ParseCommand, CreditDebitHoldFields) {
  for (auto k : {command_kind::credit, command_kind::debit, command_kind::hold}) {
    json j = valid(k);
    j["memo"] = "lesson 7";
    command c = parsed(j);
    expect_command(c, k, j["biz_id"].get<std::string>(), j["amount"].get<std::int64_t>());
    EXPECT_EQ(c.memo, "lesson 7");
    EXPECT_TRUE(c.target_type.empty());
    EXPECT_TRUE(c.target_id.empty());
    EXPECT_TRUE(is_hex64(c.request_hash)) << c.request_hash;
  }
}

TEST(ParseCommand, CaptureAmountOptionalZeroMeansWholeHold) {
  command whole = parsed(valid(command_kind::capture));
  expect_command(whole, command_kind::capture, "h1", 0);
  json j = valid(command_kind::capture);
  j["amount"] = 12;
  command part = parsed(j);
  EXPECT_EQ(part.amount, 12);
  EXPECT_NE(part.request_hash, whole.request_hash);
  // capture has no memo, and an explicit amount follows the usual range.
  j["amount"] = 0;
  EXPECT_NE(err(j).find("amount"), std::string::npos);
  EXPECT_EQ(err_with(command_kind::capture, "memo", "x"), "unknown field: memo");
}

TEST(ParseCommand, ReleaseFields) {
  command c = parsed(valid(command_kind::release));
  expect_command(c, command_kind::release, "h1", 0);
  EXPECT_EQ(err_with(command_kind::release, "amount", 5), "unknown field: amount");
}

TEST(ParseCommand, RefundFieldsAndTargetKey) {
  command c = parsed(valid(command_kind::refund));
  expect_command(c, command_kind::refund, "r1", 10);
  EXPECT_EQ(c.target_type, "debit");
  EXPECT_EQ(c.target_id, "d1");
  EXPECT_EQ(c.target_key(), (op_key{"t1", "a1", "debit", "d1"}));
  json j = valid(command_kind::refund);
  j["original_type"] = "capture";
  j["original_id"] = "h9";
  command cap = parsed(j);
  EXPECT_EQ(cap.target_key(), (op_key{"t1", "a1", "capture", "h9"}));
}

TEST(ParseCommand, RefundOriginalTypeMustBeDebitOrCapture) {
  for (const char* t : {"credit", "hold", "release", "refund", "open_account", "cancel_key", "Debit", "other"}) {
    EXPECT_EQ(err_with(command_kind::refund, "original_type", t), "original_type must be debit or capture") << t;
  }
  json j = valid(command_kind::refund);
  j.erase("original_type");
  EXPECT_EQ(err(j), "missing field: original_type");
  j = valid(command_kind::refund);
  j.erase("original_id");
  EXPECT_EQ(err(j), "missing field: original_id");
  EXPECT_NE(err_with(command_kind::refund, "original_id", "bad id").find("original_id"), std::string::npos);
}

TEST(ParseCommand, CancelKeyActsOnItsTargetKey) {
  command c = parsed(valid(command_kind::cancel_key));
  EXPECT_EQ(c.kind, command_kind::cancel_key);
  EXPECT_EQ(c.target_type, "credit");
  EXPECT_EQ(c.target_id, "c1");
  EXPECT_TRUE(c.biz_id.empty());
  // The key is the cancelled command's key, not a cancel_key key.
  EXPECT_EQ(c.key(), (op_key{"t1", "a1", "credit", "c1"}));
  EXPECT_EQ(c.key(), parsed(valid(command_kind::credit)).key());

  EXPECT_EQ(err_with(command_kind::cancel_key, "target_type", "transfer"), "target_type must be a command type");
  EXPECT_EQ(err_with(command_kind::cancel_key, "biz_id", "x"), "unknown field: biz_id");
  json j = valid(command_kind::cancel_key);
  j.erase("target_id");
  EXPECT_EQ(err(j), "missing field: target_id");
}

TEST(ParseCommand, NotAnObject) {
  EXPECT_EQ(err(json::array({1, 2})), "a command must be a JSON object");
  EXPECT_EQ(err(json("credit")), "a command must be a JSON object");
  EXPECT_EQ(err(json(nullptr)), "a command must be a JSON object");
  EXPECT_EQ(err(json(5)), "a command must be a JSON object");
}

TEST(ParseCommand, MissingOrBadType) {
  json j = valid(command_kind::credit);
  j.erase("type");
  EXPECT_EQ(err(j), "missing field: type");
  j["type"] = 3;
  EXPECT_EQ(err(j), "type must be a string");
  j["type"] = "transfer";
  EXPECT_EQ(err(j), "unknown command type: transfer");
  j["type"] = "";
  EXPECT_EQ(err(j), "unknown command type: ");
  // An attacker-sized type name is not echoed in full.
  j["type"] = std::string(1000, 'x');
  EXPECT_EQ(err(j), "unknown command type: " + std::string(64, 'x'));
}

TEST(ParseCommand, MissingRequiredFields) {
  struct req {
    command_kind k;
    const char* field;
  };
  const req cases[] = {
      {command_kind::open_account, "tenant"}, {command_kind::open_account, "account_id"},
      {command_kind::credit, "tenant"},       {command_kind::credit, "account_id"},
      {command_kind::credit, "biz_id"},       {command_kind::credit, "amount"},
      {command_kind::debit, "biz_id"},        {command_kind::debit, "amount"},
      {command_kind::hold, "biz_id"},         {command_kind::hold, "amount"},
      {command_kind::capture, "biz_id"},      {command_kind::release, "biz_id"},
      {command_kind::refund, "biz_id"},       {command_kind::cancel_key, "target_type"},
      {command_kind::cancel_key, "tenant"},
  };
  for (const auto& c : cases) {
    json j = valid(c.k);
    ASSERT_TRUE(j.contains(c.field)) << c.field;
    j.erase(c.field);
    EXPECT_EQ(err(j), std::string("missing field: ") + c.field) << to_string(c.k);
  }
}

TEST(ParseCommand, IllTypedFields) {
  EXPECT_EQ(err_with(command_kind::credit, "tenant", 7), "tenant must be a string");
  EXPECT_EQ(err_with(command_kind::credit, "account_id", json::array({"a1"})), "account_id must be a string");
  EXPECT_EQ(err_with(command_kind::credit, "biz_id", 12), "biz_id must be a string");
  EXPECT_EQ(err_with(command_kind::credit, "biz_id", nullptr), "biz_id must be a string");
  EXPECT_EQ(err_with(command_kind::credit, "memo", 1), "memo must be a string");
  EXPECT_EQ(err_with(command_kind::credit, "amount", true), "amount must be an integer");
  EXPECT_EQ(err_with(command_kind::credit, "amount", nullptr), "amount must be an integer");
  EXPECT_EQ(err_with(command_kind::credit, "amount", json::object()), "amount must be an integer");
  EXPECT_EQ(err_with(command_kind::open_account, "biz_id", false), "biz_id must be a string");
  EXPECT_EQ(err_with(command_kind::refund, "original_type", 1), "original_type must be a string");
}

TEST(ParseCommand, StringAmountsRejected) {
  for (const char* s : {"100", "1", "", "1e3"}) {
    EXPECT_EQ(err_with(command_kind::credit, "amount", s), "amount must be an integer") << s;
  }
}

TEST(ParseCommand, UnknownFieldsRejectedForEveryType) {
  for (auto k : all_kinds) {
    EXPECT_EQ(err_with(k, "trace_id", "abc"), "unknown field: trace_id") << to_string(k);
  }
  // Fields that belong to other commands are unknown too.
  EXPECT_EQ(err_with(command_kind::open_account, "amount", 1), "unknown field: amount");
  EXPECT_EQ(err_with(command_kind::debit, "original_id", "d0"), "unknown field: original_id");
  EXPECT_EQ(err_with(command_kind::refund, "memo", "m"), "unknown field: memo");
  // A long unknown name is cut in the message.
  json j = valid(command_kind::credit);
  j[std::string(200, 'z')] = 1;
  EXPECT_EQ(err(j), "unknown field: " + std::string(64, 'z'));
}

TEST(IsValidId, Boundaries) {
  EXPECT_TRUE(is_valid_id("a"));
  EXPECT_TRUE(is_valid_id("Az09._:-"));
  EXPECT_TRUE(is_valid_id(std::string(64, 'x')));
  EXPECT_FALSE(is_valid_id(std::string(65, 'x')));
  EXPECT_FALSE(is_valid_id(""));
  for (const char* bad :
       {"a b", "a/b", "a\\b", "a+b", "a@b", "a,b", "a#b", "a\"b", "a'b", "a*b", "\xc3\xa9", "a\tb", "a\nb",
        "a\x1f"
        "b"})
    EXPECT_FALSE(is_valid_id(bad)) << bad;
  EXPECT_FALSE(is_valid_id(std::string_view("a\0b", 3)));
}

TEST(ParseCommand, IdsValidatedInEveryIdField) {
  const std::string bads[] = {"",
                              "a b",
                              "x/y",
                              "caf\xc3\xa9",
                              "a\x1f"
                              "b",
                              std::string(65, 'k')};
  struct f {
    command_kind k;
    const char* field;
  };
  const f fields[] = {{command_kind::credit, "tenant"},      {command_kind::credit, "account_id"},
                      {command_kind::credit, "biz_id"},      {command_kind::open_account, "biz_id"},
                      {command_kind::refund, "original_id"}, {command_kind::cancel_key, "target_id"},
                      {command_kind::capture, "biz_id"},     {command_kind::release, "biz_id"}};
  for (const auto& fl : fields) {
    for (const auto& b : bads) {
      json j = valid(fl.k);
      j[fl.field] = b;
      EXPECT_EQ(err(j), std::string(fl.field) + " must match [A-Za-z0-9._:-]{1,64}")
          << to_string(fl.k) << " " << fl.field << "=" << b;
    }
    json j = valid(fl.k);
    j[fl.field] = std::string(64, 'k');
    command c = parsed(j);
    EXPECT_EQ(c.request_hash.size(), 64u);
  }
}

TEST(ParseCommand, AmountRange) {
  auto with_amount = [](json amount) {
    json j = valid(command_kind::debit);
    j["amount"] = std::move(amount);
    return j;
  };
  const std::string range = "amount must be between 1 and 10^15";
  EXPECT_EQ(parsed(with_amount(1)).amount, 1);
  EXPECT_EQ(parsed(with_amount(1'000'000'000'000'000)).amount, 1'000'000'000'000'000);
  EXPECT_EQ(parsed(with_amount(std::uint64_t{1'000'000'000'000'000})).amount, max_amount);
  EXPECT_EQ(err(with_amount(0)), range);
  EXPECT_EQ(err(with_amount(-1)), range);
  EXPECT_EQ(err(with_amount(-1'000'000'000'000'000)), range);
  EXPECT_EQ(err(with_amount(std::numeric_limits<std::int64_t>::min())), range);
  EXPECT_EQ(err(with_amount(1'000'000'000'000'001)), range);
  EXPECT_EQ(err(with_amount(std::numeric_limits<std::int64_t>::max())), range);
  EXPECT_EQ(err(with_amount(std::numeric_limits<std::uint64_t>::max())), range);
  // Signed, out of range, as built in code rather than parsed.
  EXPECT_EQ(err(with_amount(json(std::int64_t{1'000'000'000'000'001}))), range);
}

TEST(ParseCommand, AmountRangeFromJsonText) {
  auto parse_amount = [](const std::string& amount_text) {
    return json::parse(R"({"type":"credit","tenant":"t1","account_id":"a1","biz_id":"c1","amount":)" + amount_text +
                       "}");
  };
  const std::string range = "amount must be between 1 and 10^15";
  const std::string integer = "amount must be an integer";
  EXPECT_EQ(parsed(parse_amount("1000000000000000")).amount, 1'000'000'000'000'000);
  EXPECT_EQ(err(parse_amount("1000000000000001")), range);
  EXPECT_EQ(err(parse_amount("0")), range);
  EXPECT_EQ(err(parse_amount("-0")), range);
  EXPECT_EQ(err(parse_amount("-5")), range);
  EXPECT_EQ(err(parse_amount("9223372036854775807")), range);     // 2^63-1 (parsed as unsigned)
  EXPECT_EQ(err(parse_amount("9223372036854775808")), range);     // 2^63: fits only unsigned
  EXPECT_EQ(err(parse_amount("18446744073709551615")), range);    // 2^64-1
  EXPECT_EQ(err(parse_amount("-9223372036854775808")), range);    // INT64_MIN
  EXPECT_EQ(err(parse_amount("18446744073709551616")), integer);  // 2^64: a float to nlohmann
  EXPECT_EQ(err(parse_amount("100000000000000000000000")), integer);
  EXPECT_EQ(err(parse_amount("-9223372036854775809")), integer);
  EXPECT_EQ(err(parse_amount("1.0")), integer);
  EXPECT_EQ(err(parse_amount("1e3")), integer);
  EXPECT_EQ(err(parse_amount("1.5")), integer);
  EXPECT_EQ(err(parse_amount("\"100\"")), integer);
}

TEST(ParseCommand, MemoLength) {
  json j = valid(command_kind::credit);
  j["memo"] = std::string(256, 'm');
  EXPECT_EQ(parsed(j).memo.size(), 256u);
  j["memo"] = std::string(257, 'm');
  EXPECT_EQ(err(j), "memo is too long");
  // A memo is free text, not an id.
  j["memo"] = "any text: / \" \xc3\xa9";
  EXPECT_EQ(parsed(j).memo, "any text: / \" \xc3\xa9");
}

// The hash pins the canonical encoding: stored request hashes must stay
// comparable across versions. Expected values from
//   printf '6:credit;2:t1;2:a1;2:c1;3:100;0:;0:;0:;' | sha256sum
TEST(RequestHash, KnownCanonicalEncoding) {
  EXPECT_EQ(parsed(valid(command_kind::credit)).request_hash,
            "6bdbdb91223e7b5c9733346a430f9b1b70346cd7b8c9e3845a360350474d6351");
  EXPECT_EQ(parsed(valid(command_kind::open_account)).request_hash,
            "c345349228d2a1b1468fe30086f0b6ce86204a253cb97a4e917ad9eb40d81105");
  command c = parsed(valid(command_kind::credit));
  EXPECT_EQ(request_hash(c), c.request_hash);
}

TEST(RequestHash, StableForSameContent) {
  for (auto k : all_kinds) {
    command a = parsed(valid(k));
    command b = parsed(json::parse(valid(k).dump()));
    EXPECT_EQ(a.request_hash, b.request_hash) << to_string(k);
    EXPECT_TRUE(is_hex64(a.request_hash)) << a.request_hash;
  }
  // An empty memo is the same as no memo.
  json j = valid(command_kind::credit);
  j["memo"] = "";
  EXPECT_EQ(parsed(j).request_hash, parsed(valid(command_kind::credit)).request_hash);
}

TEST(RequestHash, IndependentOfKeyOrder) {
  const auto a = json::parse(R"({"type":"refund","tenant":"t1","account_id":"a1","biz_id":"r1","amount":10,)"
                             R"("original_type":"debit","original_id":"d1"})");
  const auto b = json::parse(R"({"original_id":"d1","amount":10,"biz_id":"r1","original_type":"debit",)"
                             R"("account_id":"a1","tenant":"t1","type":"refund"})");
  EXPECT_EQ(parsed(a).request_hash, parsed(b).request_hash);
  const auto c = json::parse(R"({"memo":"m","amount":5,"biz_id":"x","account_id":"a1","tenant":"t1","type":"debit"})");
  const auto d = json::parse(R"({"type":"debit","tenant":"t1","account_id":"a1","biz_id":"x","amount":5,"memo":"m"})");
  EXPECT_EQ(parsed(c).request_hash, parsed(d).request_hash);
}

TEST(RequestHash, ChangesWithEverySemanticField) {
  const std::string base = parsed(valid(command_kind::refund)).request_hash;
  auto changed = [&](const char* field, json v) {
    json j = valid(command_kind::refund);
    j[field] = std::move(v);
    return parsed(j).request_hash;
  };
  EXPECT_NE(changed("tenant", "t2"), base);
  EXPECT_NE(changed("account_id", "a2"), base);
  EXPECT_NE(changed("biz_id", "r2"), base);
  EXPECT_NE(changed("amount", 11), base);
  EXPECT_NE(changed("original_type", "capture"), base);
  EXPECT_NE(changed("original_id", "d2"), base);

  json credit = valid(command_kind::credit);
  const std::string cbase = parsed(credit).request_hash;
  credit["memo"] = "m";
  EXPECT_NE(parsed(credit).request_hash, cbase);
  credit["memo"] = "n";
  std::string memo_n = parsed(credit).request_hash;
  EXPECT_NE(memo_n, cbase);
  credit["memo"] = "m";
  EXPECT_NE(memo_n, parsed(credit).request_hash);
  credit = valid(command_kind::credit);
  credit["amount"] = 81;
  const std::string h81 = parsed(credit).request_hash;
  credit["amount"] = 80;
  EXPECT_NE(parsed(credit).request_hash, h81);

  // Same fields, another command type.
  json debit = valid(command_kind::credit);
  debit["type"] = "debit";
  EXPECT_NE(parsed(debit).request_hash, cbase);
  debit["type"] = "hold";
  EXPECT_NE(parsed(debit).request_hash, cbase);

  json cancel = valid(command_kind::cancel_key);
  const std::string kbase = parsed(cancel).request_hash;
  cancel["target_id"] = "c2";
  EXPECT_NE(parsed(cancel).request_hash, kbase);
  cancel = valid(command_kind::cancel_key);
  cancel["target_type"] = "debit";
  EXPECT_NE(parsed(cancel).request_hash, kbase);
}

TEST(RequestHash, LengthPrefixPreventsFieldBoundaryCollisions) {
  // "ab" + "c" and "a" + "bc" must not hash alike.
  json x = valid(command_kind::credit);
  x["account_id"] = "ab";
  x["biz_id"] = "c";
  json y = valid(command_kind::credit);
  y["account_id"] = "a";
  y["biz_id"] = "bc";
  EXPECT_NE(parsed(x).request_hash, parsed(y).request_hash);
  // A memo that spells out the encoding of later fields cannot collide either.
  command a;
  a.kind = command_kind::credit;
  a.tenant = "t";
  a.account_id = "a";
  a.biz_id = "b";
  a.amount = 1;
  a.memo = "x";
  command b = a;
  b.memo.clear();
  b.target_id = "x";
  EXPECT_NE(request_hash(a), request_hash(b));
}

TEST(OpKey, FlatSeparatesFields) {
  op_key a{"t", "a", "credit", "b"};
  op_key b{"t", "a", "credit", "b"};
  EXPECT_EQ(a.flat(), b.flat());
  EXPECT_EQ(a.flat(), std::string("t\x1f"
                                  "a\x1f"
                                  "credit\x1f"
                                  "b"));
  op_key c{"ta", "", "credit", "b"};
  EXPECT_NE(a.flat(), c.flat());
}

}  // namespace
