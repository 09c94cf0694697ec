// Unit tests of the lot decisions (account_shard/ledger/lots.hpp) and of
// how batch_state applies them: consumption order, ties, holds, captures,
// refunds into expired lots, expiry. Table-driven where the shape allows.
#include "account_shard/ledger/lots.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "account_shard/ledger/decide.hpp"
#include "tests/account_shard/parsed_command.hpp"

namespace {

using namespace tally::shard;
using tally::test::parsed;
namespace contract = tally::contract;
using json = nlohmann::json;

constexpr std::int64_t now = 1'800'000'000'000;  // the batch's clock
constexpr std::int64_t hour = 3'600'000;

lot_row lot(std::int64_t id, std::int64_t remaining, std::optional<std::int64_t> expires_at, std::int64_t held = 0,
            lot_state state = lot_state::open) {
  lot_row l;
  l.tenant = "t1";
  l.account_id = "a1";
  l.lot_id = id;
  l.granted = remaining + 50;
  l.remaining = remaining;
  l.held = held;
  l.expires_at = expires_at;
  l.state = state;
  return l;
}

// (lot id, amount) pairs: what a decision took, gave or held.
using taken = std::vector<std::pair<std::int64_t, std::int64_t>>;
taken ids(const std::vector<lot_part>& parts) {
  taken out;
  for (const auto& p : parts) out.emplace_back(p.lot_id, p.amount);
  return out;
}

struct allocation_case {
  const char* name;
  std::vector<lot_row> lots;
  std::int64_t amount;
  std::optional<taken> expected;  // nullopt: insufficient
};

TEST(Allocate, TakesInConsumptionOrder) {
  const std::vector<allocation_case> cases = {
      {"earliest expiry first, across three lots",
       {lot(1, 10, now + 3 * hour), lot(2, 10, now + 1 * hour), lot(3, 10, now + 2 * hour)},
       25,
       taken{{2, 10}, {3, 10}, {1, 5}}},
      {"non-expiring last", {lot(1, 10, std::nullopt), lot(2, 10, now + hour)}, 15, taken{{2, 10}, {1, 5}}},
      {"ties by grant order", {lot(5, 10, now + hour), lot(4, 10, now + hour)}, 12, taken{{4, 10}, {5, 2}}},
      {"non-expiring ties by grant order",
       {lot(3, 10, std::nullopt), lot(2, 10, std::nullopt)},
       11,
       taken{{2, 10}, {3, 1}}},
      {"held parts are not available", {lot(1, 10, now + hour, 8), lot(2, 10, std::nullopt)}, 5, taken{{1, 2}, {2, 3}}},
      {"a lot due at this instant is not used", {lot(1, 10, now), lot(2, 10, std::nullopt)}, 5, taken{{2, 5}}},
      {"a lot due at this instant makes it insufficient", {lot(1, 10, now), lot(2, 4, std::nullopt)}, 5, std::nullopt},
      {"a lot one millisecond before its expiry is used", {lot(1, 10, now + 1)}, 10, taken{{1, 10}}},
      {"expired and exhausted lots are skipped",
       {lot(1, 10, now + hour, 0, lot_state::expired), lot(2, 0, std::nullopt, 0, lot_state::exhausted),
        lot(3, 10, std::nullopt)},
       10,
       taken{{3, 10}}},
      {"exactly the available total", {lot(1, 3, now + hour), lot(2, 4, std::nullopt)}, 7, taken{{1, 3}, {2, 4}}},
      {"one more than available", {lot(1, 3, now + hour), lot(2, 4, std::nullopt)}, 8, std::nullopt},
      {"no lots", {}, 1, std::nullopt},
  };
  for (const auto& c : cases) {
    std::vector<const lot_row*> ptrs;
    for (const auto& l : c.lots) ptrs.push_back(&l);
    auto got = allocate(ptrs, c.amount, now);
    if (!c.expected) {
      EXPECT_FALSE(got.has_value()) << c.name;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << c.name;
    EXPECT_EQ(ids(*got), *c.expected) << c.name;
  }
}

TEST(Allocate, PartsCarryTheirLotsExpiryAndRule) {
  auto l = lot(1, 10, now + hour);
  l.rule_version = "promo-2";
  const lot_row* ptrs[] = {&l};
  auto got = allocate(ptrs, 4, now);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<lot_part>{{1, 4, now + hour, "promo-2"}}));
}

TEST(SplitCapture, ConsumesEarliestPartsAndReleasesTheRest) {
  const std::vector<lot_part> held = {{2, 10, now + hour, "1"}, {3, 10, std::nullopt, "1"}};
  struct row {
    std::int64_t take;
    taken consumed, released;
  };
  for (const auto& c : std::vector<row>{{20, {{2, 10}, {3, 10}}, {}},
                                        {15, {{2, 10}, {3, 5}}, {{3, 5}}},
                                        {10, {{2, 10}}, {{3, 10}}},
                                        {4, {{2, 4}}, {{2, 6}, {3, 10}}}}) {
    auto s = split_capture(held, c.take);
    EXPECT_EQ(ids(s.consumed), c.consumed) << "take " << c.take;
    EXPECT_EQ(ids(s.released), c.released) << "take " << c.take;
  }
}

TEST(RefundParts, MostRecentlyConsumedFirstPastEarlierRefunds) {
  const std::vector<lot_part> consumed = {{1, 10, now, "1"}, {2, 10, now + hour, "1"}, {3, 5, std::nullopt, "1"}};
  struct row {
    std::int64_t already, amount;
    taken expected;
  };
  for (const auto& c : std::vector<row>{{0, 3, {{3, 3}}},
                                        {0, 8, {{3, 5}, {2, 3}}},
                                        {3, 4, {{3, 2}, {2, 2}}},
                                        {5, 12, {{2, 10}, {1, 2}}},
                                        {15, 10, {{1, 10}}},
                                        {0, 25, {{3, 5}, {2, 10}, {1, 10}}}}) {
    EXPECT_EQ(ids(refund_parts(consumed, c.already, c.amount)), c.expected)
        << "already " << c.already << ", amount " << c.amount;
  }
}

TEST(LotsJson, RoundTrips) {
  const std::vector<lot_part> parts = {{1, 10, now, "1"}, {7, 3, std::nullopt, "promo:2"}};
  EXPECT_EQ(lots_from_json(lots_json(parts)), parts);
  EXPECT_TRUE(lots_from_json("not json").empty());
}

// ---------------------------------------------------------------- applied by batch_state

json cmd(const char* type, const std::string& id, std::int64_t amount = 0) {
  json j = {{"type", type}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", id}};
  if (amount) j["amount"] = amount;
  return j;
}

class Lots : public ::testing::Test {
 protected:
  batch_state st;
  void SetUp() override {
    for (std::int64_t i = 0; i < 64; ++i) st.free_seqs.push_back(500 + i);
    st.now_ms = now;
    st.refund_grace_ms = 7 * 24 * hour;
    st.accounts.emplace(batch_state::account_key("t1", "a1"),
                        account_row{"t1", "a1", 0, 0, account_status::active, 1, false, false, 0});
  }
  reply credit(const std::string& id, std::int64_t amount, std::optional<std::int64_t> expires_at) {
    json j = cmd("credit", id, amount);
    if (expires_at) j["expires_at"] = tally_time(*expires_at);
    return st.decide(parsed(j));
  }
  static std::string tally_time(std::int64_t ms);
  const account_row& account() { return st.accounts.at(batch_state::account_key("t1", "a1")); }
  const lot_row& lot_of(std::int64_t id) {
    for (const auto& l : st.lots.at(batch_state::account_key("t1", "a1")))
      if (l.lot_id == id) return l;
    throw std::runtime_error("no lot " + std::to_string(id));
  }
  // The invariant the shard keeps: Σ remaining = balance, Σ held = held.
  void expect_lots_add_up() {
    std::int64_t remaining = 0, held = 0;
    for (const auto& l : st.lots[batch_state::account_key("t1", "a1")]) remaining += l.remaining, held += l.held;
    EXPECT_EQ(remaining, account().balance);
    EXPECT_EQ(held, account().held);
  }
};

std::string Lots::tally_time(std::int64_t ms) {
  // Only whole seconds are needed here; the parser's own tests are in decide/command tests.
  std::time_t t = ms / 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

TEST_F(Lots, EachCreditGrantsOneLotAndDebitsTakeFirstToExpire) {
  credit("c1", 10, now + 3 * hour);
  credit("c2", 10, std::nullopt);
  credit("c3", 10, now + hour);
  EXPECT_EQ(account().lot_count, 3);
  auto r = st.decide(parsed(cmd("debit", "d1", 15)));
  ASSERT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(ids(r.lots), (taken{{3, 10}, {1, 5}}));
  EXPECT_EQ(lot_of(3).state, lot_state::exhausted);
  EXPECT_EQ(lot_of(1).remaining, 5);
  EXPECT_EQ(lot_of(2).remaining, 10);
  expect_lots_add_up();
}

TEST_F(Lots, DebitOfValueDueNowFailsInsufficientAndChangesNothing) {
  credit("c1", 10, now);
  auto before = lot_of(1);
  auto r = st.decide(parsed(cmd("debit", "d1", 1)));
  EXPECT_EQ(r.status, reply_status::rejected);
  EXPECT_EQ(r.code, contract::shard_code::insufficient_funds);
  EXPECT_EQ(lot_of(1).remaining, before.remaining);
  EXPECT_EQ(account().balance, 10);
}

TEST_F(Lots, HoldAllocatesReleaseGivesBackCaptureMakesFinal) {
  credit("c1", 10, now + hour);
  credit("c2", 10, std::nullopt);
  auto h = st.decide(parsed(cmd("hold", "h1", 15)));
  ASSERT_EQ(h.status, reply_status::succeeded);
  EXPECT_EQ(ids(h.lots), (taken{{1, 10}, {2, 5}}));
  EXPECT_EQ(lot_of(1).held, 10);
  EXPECT_EQ(lot_of(2).held, 5);
  st.holds.at(batch_state::hold_key("t1", "a1", "h1")).is_new = false;
  // A partial capture consumes the earliest parts; the rest goes back.
  auto c = st.decide(parsed(cmd("capture", "h1", 12)));
  ASSERT_EQ(c.status, reply_status::succeeded);
  EXPECT_EQ(ids(c.lots), (taken{{1, 10}, {2, 2}}));
  EXPECT_EQ(lot_of(1).remaining, 0);
  EXPECT_EQ(lot_of(1).held, 0);
  EXPECT_EQ(lot_of(2).remaining, 8);
  EXPECT_EQ(lot_of(2).held, 0);
  expect_lots_add_up();

  st.decide(parsed(cmd("hold", "h2", 8)));
  EXPECT_EQ(lot_of(2).held, 8);
  auto rel = st.decide(parsed(cmd("release", "h2")));
  ASSERT_EQ(rel.status, reply_status::succeeded);
  EXPECT_EQ(lot_of(2).held, 0);
  EXPECT_EQ(lot_of(2).remaining, 8);
  expect_lots_add_up();
}

TEST_F(Lots, ExpireTakesTheUnheldRemainderOnceAndTheHeldPartOnRelease) {
  credit("c1", 10, now - 1);  // granted already due (a transfer may carry such an expiry)
  // Held before it was due: the batch state as it was.
  st.now_ms = now - 2 * hour;
  st.decide(parsed(cmd("hold", "h1", 4)));
  st.now_ms = now;
  auto e = st.decide(parsed(cmd("expire", "1")));
  ASSERT_EQ(e.status, reply_status::succeeded);
  EXPECT_EQ(e.amount, 6);
  EXPECT_EQ(lot_of(1).state, lot_state::expired);
  EXPECT_EQ(lot_of(1).remaining, 4);
  EXPECT_EQ(account().balance, 4);
  ASSERT_FALSE(st.ledger.empty());
  EXPECT_EQ(st.ledger.back().key, (op_key{"t1", "a1", "expire", "1"}));
  EXPECT_EQ(st.ledger.back().delta, -6);
  // Again: the stored key answers; nothing moves twice.
  auto again = st.decide(parsed(cmd("expire", "1")));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(account().balance, 4);
  // The held part expires when its hold is released.
  auto ledger_before = st.ledger.size();
  auto rel = st.decide(parsed(cmd("release", "h1")));
  ASSERT_EQ(rel.status, reply_status::succeeded);
  EXPECT_EQ(account().balance, 0);
  EXPECT_EQ(account().held, 0);
  EXPECT_EQ(lot_of(1).expired, 10);
  ASSERT_EQ(st.ledger.size(), ledger_before + 1);
  EXPECT_EQ(st.ledger.back().key, (op_key{"t1", "a1", "expire", "hold:h1"}));
  EXPECT_EQ(st.ledger.back().delta, -4);
  expect_lots_add_up();
}

TEST_F(Lots, ExpireOfALotNotYetDueStoresNothing) {
  credit("c1", 10, now + 1000);
  auto ops = st.operations.size();
  auto e = st.decide(parsed(cmd("expire", "1")));
  EXPECT_EQ(e.status, reply_status::retry);
  EXPECT_EQ(e.code, contract::shard_code::lot_not_due);
  EXPECT_EQ(st.operations.size(), ops);
  EXPECT_EQ(account().balance, 10);
}

TEST_F(Lots, RefundGoesBackToLotsAndExpiredPartsIntoAGraceLot) {
  credit("c1", 10, now + hour);
  credit("c2", 10, std::nullopt);
  st.decide(parsed(cmd("debit", "d1", 15)));  // 10 from lot 1, 5 from lot 2
  // Lot 1 expires (its remaining is 0: nothing to expire, so it stays exhausted, past due).
  st.now_ms = now + 2 * hour;
  json r1 = cmd("refund", "r1", 7);
  r1["original_type"] = "debit";
  r1["original_id"] = "d1";
  auto r = st.decide(parsed(r1));
  ASSERT_EQ(r.status, reply_status::succeeded);
  // Most recently consumed first: 5 back to lot 2, then 2 that lot 1 gave, into a new lot.
  ASSERT_EQ(r.lots.size(), 2u);
  EXPECT_EQ(r.lots[0], (lot_part{2, 5, std::nullopt, "1"}));
  EXPECT_EQ(r.lots[1].lot_id, 3);
  EXPECT_EQ(r.lots[1].amount, 2);
  EXPECT_EQ(r.lots[1].expires_at, now + 2 * hour + 7 * 24 * hour);
  EXPECT_EQ(lot_of(3).origin, lot_origin::refund);
  EXPECT_EQ(lot_of(3).grace_ms, 7 * 24 * hour);
  EXPECT_EQ(lot_of(2).remaining, 10);
  expect_lots_add_up();
}

TEST_F(Lots, TransferCreditGrantsOneLotPerExpiry) {
  json j = cmd("credit", "c1", 15);
  j["lots"] =
      json::array({{{"amount", 10}, {"expires_at", "2027-01-01T00:00:00Z"}, {"rule_version", "p"}}, {{"amount", 5}}});
  auto r = st.decide(parsed(j));
  ASSERT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(ids(r.lots), (taken{{1, 10}, {2, 5}}));
  EXPECT_EQ(lot_of(1).expires_at, 1798761600000);
  EXPECT_EQ(lot_of(1).rule_version, "p");
  EXPECT_EQ(lot_of(1).origin, lot_origin::transfer);
  EXPECT_FALSE(lot_of(2).expires_at.has_value());
  expect_lots_add_up();
}

// Open lots grow with the terms in force, not with the credits: a grant or
// a transfer's arrival on the terms (expiry, rule version) of an open lot
// adds to it, each operation still naming the lot and its own amount, so a
// refund comes back to it.
TEST_F(Lots, CreditsOnTheSameTermsShareALotAndRefundsComeBackToIt) {
  credit("c1", 10, now + hour);
  credit("c2", 5, now + hour);
  credit("c3", 7, std::nullopt);
  credit("c4", 3, std::nullopt);
  json other_rule = cmd("credit", "c5", 2);
  other_rule["rule_version"] = "2";
  st.decide(parsed(other_rule));
  json arrival = cmd("credit", "c6", 6);
  arrival["lots"] = json::array({{{"amount", 4}, {"expires_at", tally_time(now + hour)}}, {{"amount", 2}}});
  auto a = st.decide(parsed(arrival));
  ASSERT_EQ(a.status, reply_status::succeeded);
  EXPECT_EQ(ids(a.lots), (taken{{1, 4}, {2, 2}}));
  EXPECT_EQ(account().lot_count, 3);
  EXPECT_EQ(lot_of(1).granted, 19);
  EXPECT_EQ(lot_of(2).granted, 12);
  EXPECT_EQ(lot_of(3).granted, 2);
  EXPECT_EQ(lot_of(3).rule_version, "2");
  EXPECT_EQ(lot_of(1).origin, lot_origin::grant);  // the terms' first grant

  auto d = st.decide(parsed(cmd("debit", "d1", 25)));
  EXPECT_EQ(ids(d.lots), (taken{{1, 19}, {2, 6}}));
  EXPECT_EQ(lot_of(1).state, lot_state::exhausted);
  json r = cmd("refund", "r1", 20);
  r["original_type"] = "debit";
  r["original_id"] = "d1";
  auto back = st.decide(parsed(r));
  ASSERT_EQ(back.status, reply_status::succeeded);
  EXPECT_EQ(ids(back.lots), (taken{{2, 6}, {1, 14}}));
  EXPECT_EQ(lot_of(1).remaining, 14);
  EXPECT_EQ(lot_of(1).state, lot_state::open);
  expect_lots_add_up();
}

// Only an open lot takes a grant: not one exhausted (its value was
// consumed), not one due (its value expires), never a refund's grace lot.
TEST_F(Lots, AGrantOpensALotWhereNoOpenOneIsOnItsTerms) {
  credit("c1", 10, now + hour);
  st.decide(parsed(cmd("debit", "d1", 10)));
  credit("c2", 5, now + hour);
  EXPECT_EQ(account().lot_count, 2);
  EXPECT_EQ(lot_of(1).granted, 10);

  credit("c3", 4, now - 1);  // due already (a transfer may carry such an expiry)
  credit("c4", 4, now - 1);
  EXPECT_EQ(account().lot_count, 4);

  // A refund of d1 after lot 1's expiry goes to a grace lot; a grant on the grace lot's terms opens its own.
  st.now_ms = now + 2 * hour;
  json r = cmd("refund", "r1", 3);
  r["original_type"] = "debit";
  r["original_id"] = "d1";
  auto back = st.decide(parsed(r));
  ASSERT_EQ(back.lots.size(), 1u);
  const auto grace = back.lots[0];
  EXPECT_EQ(grace.lot_id, 5);
  ASSERT_TRUE(grace.expires_at);
  credit("c5", 1, *grace.expires_at);
  EXPECT_EQ(account().lot_count, 6);
  EXPECT_EQ(lot_of(5).granted, 3);
  expect_lots_add_up();
}

TEST_F(Lots, EventsCarryTheNextExpiry) {
  credit("c1", 10, now + 2 * hour);
  credit("c2", 4, now + hour);
  credit("c3", 6, now + hour);
  auto payload = json::parse(st.events.back().payload);
  EXPECT_EQ(payload["next_expiry"]["amount"], 10);
  EXPECT_EQ(payload["next_expiry"]["at"], "2027-01-15T09:00:00.000Z");
}

}  // namespace
