// Unit tests of reconcile_account (no I/O).
#include "account_shard/ledger/reconcile.hpp"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::json;
using namespace tally::shard;

entry_view e(std::int64_t seq, const char* type, const char* id, std::int64_t delta,
             std::optional<std::int64_t> reverses = std::nullopt) {
  return {seq, type, id, delta, reverses};
}

// Account a1 of t1 against its `snapshot`, with nothing written after the
// watermark and nothing held.
account_reconciliation reconcile(std::int64_t snapshot, const std::vector<entry_view>& entries) {
  return reconcile_account("t1", "a1", snapshot, 0, 0, 0, entries);
}

// An account credited 50 twice under one business key: rebuilt 100.
const std::vector<entry_view> credited_twice = {
    e(1, "open_account", "open", 0),
    e(2, "credit", "c1", 50),
    e(3, "credit", "c1", 50),
};

// A finding by its class and amount.
struct found {
  std::string kind;
  std::int64_t amount;
  bool operator==(const found&) const = default;
};

// What a reconciliation concluded: the rebuilt balance, the difference,
// every finding's class and amount, and whether it freezes the account.
struct outcome {
  std::int64_t rebuilt, difference;
  std::vector<found> findings;
  bool freezes;
  bool operator==(const outcome&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const outcome& o) {
    os << "{rebuilt " << o.rebuilt << ", difference " << o.difference << ", findings [";
    for (const auto& f : o.findings) os << " " << f.kind << " " << f.amount << ";";
    return os << " ], " << (o.freezes ? "freezes" : "does not freeze") << "}";
  }
};

outcome outcome_of(const account_reconciliation& r) {
  outcome o{r.rebuilt, r.difference, {}, r.needs_freeze()};
  for (const auto& f : r.findings) o.findings.push_back({f.kind, f.amount});
  return o;
}

// DESIGN.md: +100, −80, +50, a duplicate of one business key and a
// reversal; rebuilt 70, snapshot 20 → difference 50, a duplicate.
TEST(Reconcile, DesignWorkedExample) {
  const std::vector<entry_view> entries = {
      e(1, "open_account", "open", 0),    e(2, "credit", "c1", 100), e(3, "debit", "d1", -80),
      e(4, "credit", "c2", 50),           e(5, "credit", "c2", 50),  // the same business key, a second effect
      e(6, "reversal", "rev-c2", -50, 4),                            // a legitimate reversing entry
  };
  auto r = reconcile(20, entries);
  EXPECT_EQ(r.tenant, "t1");
  EXPECT_EQ(r.account_id, "a1");
  EXPECT_EQ(r.snapshot, 20);
  ASSERT_EQ(outcome_of(r), (outcome{70, 50, {{"duplicate", 50}, {"reversal", -50}}, true}));
  const finding& dup = r.findings[0];
  EXPECT_EQ(dup.biz_type, "credit");
  EXPECT_EQ(dup.biz_id, "c2");
  EXPECT_EQ(dup.seq, std::optional<std::int64_t>(5));
  const finding& rev = r.findings[1];
  EXPECT_EQ(rev.biz_type, "reversal");
  EXPECT_EQ(rev.biz_id, "rev-c2");
  EXPECT_EQ(rev.seq, std::optional<std::int64_t>(6));

  EXPECT_EQ(to_json(r), json::parse(R"({"tenant":"t1","account_id":"a1","snapshot":20,"rebuilt":70,
    "difference":50,"writes_after_watermark":0,"findings":[
      {"class":"duplicate","amount":50,"biz_type":"credit","biz_id":"c2","seq":5},
      {"class":"reversal","amount":-50,"biz_type":"reversal","biz_id":"rev-c2","seq":6}]})"));
}

TEST(Reconcile, ReversalIsReportedButNotCounted) {
  // A refund reversing the debit, reflected in the snapshot: no difference.
  const std::vector<entry_view> entries = {
      e(1, "open_account", "open", 0),
      e(2, "credit", "c1", 100),
      e(3, "debit", "d1", -80),
      e(4, "refund", "r1", 30, 3),
  };
  auto r = reconcile(50, entries);
  ASSERT_EQ(outcome_of(r), (outcome{50, 0, {{"reversal", 30}}, false}));
  EXPECT_EQ(r.findings[0].seq, std::optional<std::int64_t>(4));
}

TEST(Reconcile, CleanAccountHasNoFindings) {
  const std::vector<entry_view> entries = {
      e(10, "open_account", "open", 0),
      e(12, "credit", "c1", 100),
      e(15, "debit", "d1", -30),
      e(16, "capture", "h1", -20),
  };
  auto r = reconcile_account("t1", "a1", 50, 0, 15, 15, entries);
  EXPECT_EQ(outcome_of(r), (outcome{50, 0, {}, false}));
  EXPECT_EQ(to_json(r)["findings"], json::array());
}

TEST(Reconcile, WritesAfterWatermarkAreCountedApart) {
  // Today's balance is 570; 500 of it was written after W. The caller passes
  // the snapshot as of W (70) and only the entries ≤ W.
  const std::vector<entry_view> entries = {e(1, "open_account", "open", 0), e(2, "credit", "c1", 70)};
  auto r = reconcile_account("t1", "a1", 70, 500, 0, 0, entries);
  EXPECT_EQ(outcome_of(r), (outcome{70, 0, {}, false}));
  EXPECT_EQ(r.writes_after_watermark, 500);
  EXPECT_EQ(to_json(r)["writes_after_watermark"], 500);
}

TEST(Reconcile, MissingOpening) {
  const std::vector<entry_view> entries = {e(2, "credit", "c1", 100), e(3, "debit", "d1", -30)};
  auto r = reconcile(70, entries);
  // A baseline to record, not a difference: it does not freeze.
  ASSERT_EQ(outcome_of(r), (outcome{70, 0, {{"missing_opening", 0}}, false}));
  EXPECT_FALSE(r.findings[0].seq.has_value());
  EXPECT_EQ(to_json(r)["findings"], json::parse(R"([{"class":"missing_opening","amount":0}])"));
}

TEST(Reconcile, MissingOpeningWithPreLedgerBalanceIsUnexplained) {
  // The account held 20 before its ledger began: the baseline is missing and
  // the difference is real until an opening is recorded.
  const std::vector<entry_view> entries = {e(2, "credit", "c1", 100)};
  auto r = reconcile(120, entries);
  EXPECT_EQ(outcome_of(r), (outcome{100, -20, {{"missing_opening", 0}, {"unexplained", -20}}, true}));
}

TEST(Reconcile, EmptyLedger) {
  auto r = reconcile(0, {});
  EXPECT_EQ(outcome_of(r), (outcome{0, 0, {{"missing_opening", 0}}, false}));
}

TEST(Reconcile, HeldMismatch) {
  const std::vector<entry_view> entries = {e(1, "open_account", "open", 0), e(2, "credit", "c1", 100)};
  auto r = reconcile_account("t1", "a1", 100, 0, 30, 20, entries);
  EXPECT_EQ(outcome_of(r), (outcome{100, 0, {{"held_mismatch", 10}}, true}));

  auto under = reconcile_account("t1", "a1", 100, 0, 0, 25, entries);
  EXPECT_EQ(outcome_of(under), (outcome{100, 0, {{"held_mismatch", -25}}, true}));
}

TEST(Reconcile, CorruptedBalanceIsUnexplainedAndFreezes) {
  const std::vector<entry_view> entries = {
      e(1, "open_account", "open", 0),
      e(2, "credit", "c1", 100),
      e(3, "debit", "d1", -30),
  };
  // Someone edited the balance by hand: 75 instead of 70.
  auto r = reconcile(75, entries);
  ASSERT_EQ(outcome_of(r), (outcome{70, -5, {{"unexplained", -5}}, true}));
  EXPECT_TRUE(r.findings[0].biz_type.empty());
  EXPECT_FALSE(r.findings[0].seq.has_value());

  EXPECT_EQ(outcome_of(reconcile(60, entries)), (outcome{70, 10, {{"unexplained", 10}}, true}));
}

TEST(Reconcile, DuplicatePlusUnexplainedRemainder) {
  // A duplicate of 50 explains only part of a difference of 53.
  auto r = reconcile(47, credited_twice);
  EXPECT_EQ(outcome_of(r), (outcome{100, 53, {{"duplicate", 50}, {"unexplained", 3}}, true}));
}

TEST(Reconcile, EveryExtraEffectOfAKeyIsADuplicate) {
  const std::vector<entry_view> entries = {
      e(1, "open_account", "open", 0), e(2, "debit", "x", -10),
      e(3, "credit", "x", 100),  // another biz_type with the same id: another key
      e(4, "debit", "x", -10),         e(5, "debit", "x", -10),
  };
  // The account really moved +100 - 10.
  auto r = reconcile(90, entries);
  ASSERT_EQ(outcome_of(r), (outcome{70, -20, {{"duplicate", -10}, {"duplicate", -10}}, true}));
  EXPECT_EQ(r.findings[0].seq, std::optional<std::int64_t>(4));
  EXPECT_EQ(r.findings[1].seq, std::optional<std::int64_t>(5));
}

TEST(Reconcile, DuplicateFreezesEvenWithoutDifference) {
  // The balance took the duplicate too: the books agree but a key has two
  // effects (a broken constraint), which must still stop writes.
  // A zero difference less the duplicate's 50 leaves -50 unexplained.
  EXPECT_EQ(outcome_of(reconcile(100, credited_twice)),
            (outcome{100, 0, {{"duplicate", 50}, {"unexplained", -50}}, true}));
}

TEST(NeedsFreeze, OnlyRealProblemsFreeze) {
  account_reconciliation r;
  EXPECT_FALSE(r.needs_freeze());
  r.findings.push_back({"reversal", 5, "refund", "r1", 3});
  r.findings.push_back({"missing_opening", 0, "", "", std::nullopt});
  EXPECT_FALSE(r.needs_freeze());
  r.difference = 1;
  EXPECT_TRUE(r.needs_freeze());
  r.difference = 0;
  r.findings.push_back({"held_mismatch", 1, "", "", std::nullopt});
  EXPECT_TRUE(r.needs_freeze());
}

TEST(NextCheckpoint, ACleanCheckEndsAtTheAccountsLastEntryWithItsSum) {
  const checkpoint before{10, 500, true};
  const auto after = next_checkpoint(before, true, 42, 650);
  EXPECT_EQ(after.seq, 42) << "its last entry, not the run's watermark";
  EXPECT_EQ(after.balance, 650);
  EXPECT_TRUE(after.clean);
}

TEST(NextCheckpoint, ADifferingAccountKeepsItsLastCleanOneMarkedToCheckAgain) {
  const auto after = next_checkpoint({10, 500, true}, false, 42, 651);
  EXPECT_EQ(after.seq, 10);
  EXPECT_EQ(after.balance, 500);
  EXPECT_FALSE(after.clean);
  const auto never = next_checkpoint({}, false, 42, 651);
  EXPECT_EQ(never.seq, 0);
  EXPECT_EQ(never.balance, 0);
  EXPECT_FALSE(never.clean);
  const auto agrees_again = next_checkpoint(after, true, 50, 700);
  EXPECT_EQ(agrees_again.seq, 50);
  EXPECT_EQ(agrees_again.balance, 700);
  EXPECT_TRUE(agrees_again.clean);
}

TEST(NextCheckpoint, NeverMovesBackAtAnOlderWatermark) {
  const checkpoint before{42, 650, true};
  const auto after = next_checkpoint(before, true, 7, 100);
  EXPECT_EQ(after.seq, 42);
  EXPECT_EQ(after.balance, 650);
  // A differing account's last clean checkpoint may be older: it is the
  // only clean one there is.
  EXPECT_EQ(next_checkpoint({42, 650, false}, true, 7, 100).seq, 7);
}

TEST(LotMismatches, WithoutTheHistoryOnlyHeldIsChecked) {
  lot_view v;
  v.lot_id = 3;
  v.remaining = 10;
  v.held = 4;
  v.holds_held = 3;
  v.is_expired = true;  // without its expire entry, which was not read
  v.history_read = false;
  std::vector<finding> found;
  find_lot_mismatches(v, found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].amount, 1);
  EXPECT_EQ(found[0].biz_id, "3");
  found.clear();
  v.history_read = true;
  find_lot_mismatches(v, found);
  EXPECT_EQ(found.size(), 3u) << "remaining against the operations, held, and the missing expire entry";
}

}  // namespace
