// Unit tests of batch_state::decide and reply_json (no I/O). Each test builds
// a batch_state by hand, shaped as store/batch.cpp loads it: rows read under
// lock (dirty = is_new = false) and one reserved ledger sequence number per
// command in free_seqs, ascending.
#include "account_shard/ledger/decide.hpp"

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"
#include "tests/account_shard/parsed_command.hpp"

namespace {

using json = nlohmann::json;
using namespace tally::shard;
using tally::test::parsed;
namespace contract = tally::contract;

constexpr std::int64_t first_seq = 1001;
constexpr std::int64_t i64max = std::numeric_limits<std::int64_t>::max();

json base(const char* type, const std::string& account) {
  return {{"type", type}, {"tenant", "t1"}, {"account_id", account}};
}
command open_cmd(const std::string& account = "a1", const std::string& biz_id = "") {
  json j = base("open_account", account);
  if (!biz_id.empty()) j["biz_id"] = biz_id;
  return parsed(j);
}
command amount_cmd(const char* type, const std::string& id, std::int64_t amount, const std::string& account,
                   const std::string& memo) {
  json j = base(type, account);
  j["biz_id"] = id;
  j["amount"] = amount;
  if (!memo.empty()) j["memo"] = memo;
  return parsed(j);
}
command credit(const std::string& id, std::int64_t amount, const std::string& account = "a1",
               const std::string& memo = "") {
  return amount_cmd("credit", id, amount, account, memo);
}
command debit(const std::string& id, std::int64_t amount, const std::string& account = "a1",
              const std::string& memo = "") {
  return amount_cmd("debit", id, amount, account, memo);
}
command hold(const std::string& id, std::int64_t amount, const std::string& account = "a1") {
  return amount_cmd("hold", id, amount, account, "");
}
command capture(const std::string& id, std::int64_t amount = 0, const std::string& account = "a1") {
  json j = base("capture", account);
  j["biz_id"] = id;
  if (amount != 0) j["amount"] = amount;
  return parsed(j);
}
command release(const std::string& id, const std::string& account = "a1") {
  json j = base("release", account);
  j["biz_id"] = id;
  return parsed(j);
}
command refund(const std::string& id, std::int64_t amount, const std::string& original_id,
               const std::string& original_type = "debit", const std::string& account = "a1") {
  json j = base("refund", account);
  j["biz_id"] = id;
  if (amount != 0) j["amount"] = amount;  // none: what is left of the original
  j["original_type"] = original_type;
  j["original_id"] = original_id;
  return parsed(j);
}
command cancel_key(const std::string& target_type, const std::string& target_id, const std::string& account = "a1") {
  json j = base("cancel_key", account);
  j["target_type"] = target_type;
  j["target_id"] = target_id;
  return parsed(j);
}

std::string flat(const std::string& type, const std::string& id, const std::string& account = "a1") {
  return op_key{"t1", account, type, id}.flat();
}

// reply_json without "replayed", to compare a first reply with its replays.
json without_replayed(const reply& r) {
  json j = json::parse(contract::to_json_text(r));
  j.erase("replayed");
  return j;
}

// The account as a reply says it is after its command.
struct after {
  std::int64_t balance, held, version;
  bool operator==(const after&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const after& a) {
    return os << "{balance " << a.balance << ", held " << a.held << ", version " << a.version << "}";
  }
};
after after_of(const reply& r) { return {r.balance_after, r.held_after, r.version}; }

// What a reply decided, and the code that says why.
struct verdict {
  reply_status status;
  std::optional<contract::shard_code> code;
  bool operator==(const verdict&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const verdict& v) {
    return os << "{" << to_string(v.status) << ", " << (v.code ? to_string(*v.code) : "no code") << "}";
  }
};
verdict verdict_of(const reply& r) { return {r.status, r.code}; }

class Decide : public ::testing::Test {
 protected:
  batch_state st;

  void SetUp() override {
    for (std::int64_t i = 0; i < 64; ++i) st.free_seqs.push_back(first_seq + i);
  }

  // An existing account, as loaded under lock.
  account_row& add_account(const std::string& id, std::int64_t balance, std::int64_t held = 0, std::int64_t version = 1,
                           account_status status = account_status::active) {
    account_row a{"t1", id, balance, held, status, version, false, false, 0};
    if (balance > 0) {
      // Its value in one non-expiring lot, as the migration leaves it.
      lot_row l;
      l.tenant = "t1";
      l.account_id = id;
      l.lot_id = a.lot_count = 1;
      l.granted = l.remaining = balance;
      l.held = held;
      st.lots[batch_state::account_key("t1", id)] = {l};
    }
    return st.accounts.insert_or_assign(batch_state::account_key("t1", id), a).first->second;
  }
  // A stored operation, as loaded under lock.
  operation_row& add_operation(const command& c, op_state state, std::int64_t amount, std::int64_t ledger_seq,
                               std::optional<contract::shard_code> reason = std::nullopt) {
    operation_row op;
    op.key = c.key();
    op.request_hash = c.request_hash;
    op.state = state;
    op.amount = amount;
    op.reason = reason;
    if (ledger_seq != 0) op.ledger_seq = ledger_seq;
    return st.operations.insert_or_assign(op.key.flat(), op).first->second;
  }
  hold_row& add_hold(const std::string& id, std::int64_t amount, hold_state state = hold_state::held) {
    hold_row h{"t1", "a1", id, amount, 0, state, false, false};
    // Its record, naming the lot it holds in.
    if (state == hold_state::held)
      add_operation(hold(id, amount), op_state::succeeded, amount, 0).lots = {{1, amount, std::nullopt, "1"}};
    return st.holds.insert_or_assign(batch_state::hold_key("t1", "a1", id), h).first->second;
  }

  const account_row& acc(const std::string& id = "a1") { return st.accounts.at(batch_state::account_key("t1", id)); }
  const operation_row& op(const std::string& type, const std::string& id, const std::string& account = "a1") {
    return st.operations.at(flat(type, id, account));
  }
  const hold_row& held_row(const std::string& id) { return st.holds.at(batch_state::hold_key("t1", "a1", id)); }

  // The effect counters that must not move when nothing is stored.
  struct counts {
    std::size_t ops, ledger, events, holds, next_seq;
    std::int64_t balance, held, version;
    bool operator==(const counts&) const = default;
  };
  counts snapshot(const std::string& account = "a1") {
    auto it = st.accounts.find(batch_state::account_key("t1", account));
    counts c{st.operations.size(), st.ledger.size(), st.events.size(), st.holds.size(), st.next_seq, 0, 0, 0};
    if (it != st.accounts.end()) {
      c.balance = it->second.balance;
      c.held = it->second.held;
      c.version = it->second.version;
    }
    return c;
  }
};

// ---------------------------------------------------------------- worked examples

TEST_F(Decide, TwoDebitsOf80FromHundredOneSucceedsOneRejected) {
  add_account("a1", 100, 0, 5);
  reply r1 = st.decide(debit("d1", 80));
  reply r2 = st.decide(debit("d2", 80));

  EXPECT_EQ(r1.status, reply_status::succeeded);
  EXPECT_FALSE(r1.replayed);
  EXPECT_EQ(r1.amount, 80);
  EXPECT_EQ(r1.balance_after, 20);
  EXPECT_EQ(r1.version, 6);
  ASSERT_TRUE(r1.ledger_seq.has_value());
  EXPECT_EQ(*r1.ledger_seq, first_seq);

  EXPECT_EQ(verdict_of(r2), (verdict{reply_status::rejected, contract::shard_code::insufficient_funds}));
  EXPECT_FALSE(r2.replayed);
  EXPECT_EQ(r2.balance_after, 20);
  EXPECT_EQ(r2.version, 6);
  EXPECT_FALSE(r2.ledger_seq.has_value());

  EXPECT_EQ(acc().balance, 20);
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(acc().version, 6);
  EXPECT_TRUE(acc().dirty);
  EXPECT_FALSE(acc().is_new);

  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].seq, first_seq);
  EXPECT_EQ(st.ledger[0].key, (op_key{"t1", "a1", "debit", "d1"}));
  EXPECT_EQ(st.ledger[0].delta, -80);
  EXPECT_EQ(st.ledger[0].balance_after, 20);
  EXPECT_FALSE(st.ledger[0].reverses.has_value());
  ASSERT_EQ(st.events.size(), 1u);
  EXPECT_EQ(st.events[0].event_type, "account.debited");
  EXPECT_EQ(st.events[0].version, 6);

  // Both outcomes are stored: the rejection is the key's terminal outcome too.
  ASSERT_EQ(st.operations.size(), 2u);
  EXPECT_EQ(op("debit", "d1").state, op_state::succeeded);
  EXPECT_EQ(op("debit", "d1").amount, 80);
  EXPECT_EQ(op("debit", "d1").ledger_seq, std::optional<std::int64_t>(first_seq));
  EXPECT_TRUE(op("debit", "d1").is_new);
  EXPECT_TRUE(op("debit", "d1").dirty);
  EXPECT_EQ(op("debit", "d2").state, op_state::rejected);
  EXPECT_EQ(op("debit", "d2").reason, contract::shard_code::insufficient_funds);
  EXPECT_EQ(op("debit", "d2").amount, 0);
  EXPECT_FALSE(op("debit", "d2").ledger_seq.has_value());
  EXPECT_EQ(op("debit", "d2").balance_after, 20);
}

TEST_F(Decide, DebitOfExactlyTheAvailableSucceedsOneMoreIsRejected) {
  add_account("a1", 100);
  EXPECT_EQ(st.decide(debit("d1", 101)).code, contract::shard_code::insufficient_funds);
  reply r = st.decide(debit("d2", 100));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(r.balance_after, 0);
  EXPECT_EQ(acc().balance, 0);
  EXPECT_EQ(st.decide(debit("d3", 1)).code, contract::shard_code::insufficient_funds);
}

TEST_F(Decide, SameKeyTenTimesIsOneEffect) {
  add_account("a1", 100);
  const command c = debit("d1", 80, "a1", "lesson");
  reply first = st.decide(c);
  ASSERT_EQ(first.status, reply_status::succeeded);
  for (int i = 0; i < 9; ++i) {
    reply again = st.decide(debit("d1", 80, "a1", "lesson"));  // a fresh parse: same content, same hash
    EXPECT_EQ(again.status, reply_status::succeeded);
    EXPECT_TRUE(again.replayed);
    EXPECT_EQ(without_replayed(again), without_replayed(first));
    EXPECT_EQ(json::parse(contract::to_json_text(again))["replayed"], true);
  }
  EXPECT_EQ(json::parse(contract::to_json_text(first))["replayed"], false);
  EXPECT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.events.size(), 1u);
  EXPECT_EQ(st.operations.size(), 1u);
  EXPECT_EQ(st.next_seq, 1u);
  EXPECT_EQ(acc().balance, 20);
  EXPECT_EQ(acc().version, 2);
}

TEST_F(Decide, SameKeyReplayedFromAnEarlierBatch) {
  // Batch 1 decides; batch 2 loads the committed rows and sees the retry.
  add_account("a1", 100);
  reply first = st.decide(debit("d1", 80));
  const operation_row stored = op("debit", "d1");

  batch_state next;
  next.free_seqs = {2001};
  account_row a = acc();
  a.dirty = a.is_new = false;
  next.accounts.emplace(batch_state::account_key("t1", "a1"), a);
  operation_row loaded = stored;
  loaded.dirty = loaded.is_new = false;
  next.operations.emplace(loaded.key.flat(), loaded);

  reply again = next.decide(debit("d1", 80));
  EXPECT_EQ(again.status, reply_status::succeeded);
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(without_replayed(again), without_replayed(first));
  EXPECT_TRUE(next.ledger.empty());
  EXPECT_TRUE(next.events.empty());
  EXPECT_EQ(next.next_seq, 0u);
  EXPECT_FALSE(next.operations.begin()->second.dirty);
  EXPECT_FALSE(next.accounts.begin()->second.dirty);
  EXPECT_EQ(next.accounts.begin()->second.balance, 20);
}

TEST_F(Decide, SameKeyWithOtherAmountIsConflictAndChangesNothing) {
  add_account("a1", 100);
  reply first = st.decide(debit("d1", 80));
  ASSERT_EQ(first.status, reply_status::succeeded);
  const counts before = snapshot();
  const operation_row stored = op("debit", "d1");

  reply r = st.decide(debit("d1", 81));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::conflict, contract::shard_code::idempotency_conflict}));
  EXPECT_EQ(r.kind, command_kind::debit);
  EXPECT_EQ(r.biz_id, "d1");
  EXPECT_FALSE(r.replayed);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(op("debit", "d1").request_hash, stored.request_hash);
  EXPECT_EQ(op("debit", "d1").amount, 80);
  EXPECT_EQ(json::parse(contract::to_json_text(r)),
            json::parse(R"({"status":"conflict","command":"debit","biz_id":"d1","code":"idempotency_conflict"})"));

  // Any semantic change conflicts: a memo too.
  EXPECT_EQ(st.decide(debit("d1", 80, "a1", "other memo")).status, reply_status::conflict);
  EXPECT_EQ(snapshot(), before);
  // And the original content still replays.
  EXPECT_TRUE(st.decide(debit("d1", 80)).replayed);
}

TEST_F(Decide, ConflictWithStoredRejectionChangesNothing) {
  add_account("a1", 10);
  ASSERT_EQ(st.decide(debit("d1", 80)).status, reply_status::rejected);
  const counts before = snapshot();
  reply r = st.decide(debit("d1", 5));  // would succeed as a new key
  EXPECT_EQ(r.status, reply_status::conflict);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(acc().balance, 10);
}

TEST_F(Decide, StoredRejectionIsReplayedEvenWhenFundsArrive) {
  add_account("a1", 50);
  reply first = st.decide(debit("d1", 80));
  ASSERT_EQ(first.status, reply_status::rejected);
  ASSERT_EQ(st.decide(credit("c1", 100)).status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, 150);

  reply again = st.decide(debit("d1", 80));
  EXPECT_EQ(verdict_of(again), (verdict{reply_status::rejected, contract::shard_code::insufficient_funds}));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.balance_after, 50);  // the stored outcome, not today's balance
  EXPECT_EQ(without_replayed(again), without_replayed(first));
  EXPECT_EQ(acc().balance, 150);
  EXPECT_EQ(st.ledger.size(), 1u);
}

TEST_F(Decide, RejectionLoadedFromStoreIsReplayed) {
  add_account("a1", 1000, 0, 9);
  const command d = debit("d1", 80);
  auto& stored = add_operation(d, op_state::rejected, 0, 0, contract::shard_code::insufficient_funds);
  stored.balance_after = 40;
  stored.version_after = 3;
  reply r = st.decide(d);
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::rejected, contract::shard_code::insufficient_funds}));
  EXPECT_TRUE(r.replayed);
  EXPECT_EQ(r.balance_after, 40);
  EXPECT_EQ(r.version, 3);
  EXPECT_EQ(acc().balance, 1000);
  EXPECT_TRUE(st.ledger.empty());
  EXPECT_FALSE(acc().dirty);
}

// ---------------------------------------------------------------- credits

TEST_F(Decide, CreditAddsAndRecordsEverything) {
  add_account("a1", 5, 2, 3);
  reply r = st.decide(credit("c1", 100, "a1", "gift"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(r.kind, command_kind::credit);
  EXPECT_EQ(r.biz_id, "c1");
  EXPECT_EQ(r.amount, 100);
  EXPECT_EQ(after_of(r), (after{105, 2, 4}));
  EXPECT_EQ(r.ledger_seq, std::optional<std::int64_t>(first_seq));
  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].delta, 100);
  EXPECT_EQ(st.ledger[0].balance_after, 105);
  const auto& o = op("credit", "c1");
  EXPECT_EQ(o.request_hash, credit("c1", 100, "a1", "gift").request_hash);
  EXPECT_EQ(o.state, op_state::succeeded);
  EXPECT_EQ(o.amount, 100);
  EXPECT_EQ(o.balance_after, 105);
  EXPECT_EQ(o.held_after, 2);
  EXPECT_EQ(o.version_after, 4);
  EXPECT_EQ(o.refunded, 0);
}

TEST_F(Decide, CreditOverflowNearInt64MaxIsRejected) {
  add_account("a1", i64max - 10);
  reply ok = st.decide(credit("c1", 10));
  EXPECT_EQ(ok.status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, i64max);
  const counts before = snapshot();
  reply r = st.decide(credit("c2", 1));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::rejected, contract::shard_code::balance_overflow}));
  EXPECT_EQ(r.balance_after, i64max);
  EXPECT_EQ(acc().balance, i64max);
  EXPECT_EQ(st.ledger.size(), before.ledger);
  EXPECT_EQ(st.events.size(), before.events);
  EXPECT_EQ(op("credit", "c2").state, op_state::rejected);
  EXPECT_EQ(op("credit", "c2").reason, contract::shard_code::balance_overflow);
}

TEST_F(Decide, CreditOverflowByOne) {
  add_account("a1", i64max - max_amount + 1);
  reply r = st.decide(credit("c1", max_amount));
  EXPECT_EQ(r.code, contract::shard_code::balance_overflow);
  EXPECT_EQ(acc().balance, i64max - max_amount + 1);
  EXPECT_EQ(st.decide(credit("c2", max_amount - 1)).status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, i64max);
}

// ---------------------------------------------------------------- holds

TEST_F(Decide, HoldReducesAvailableNotBalance) {
  add_account("a1", 100);
  reply h = st.decide(hold("h1", 30));
  EXPECT_EQ(h.status, reply_status::succeeded);
  EXPECT_EQ(h.amount, 30);
  EXPECT_EQ(after_of(h), (after{100, 30, 2}));
  EXPECT_FALSE(h.ledger_seq.has_value());
  EXPECT_TRUE(st.ledger.empty());  // a hold moves no balance
  const auto& row = held_row("h1");
  EXPECT_EQ(row.state, hold_state::held);
  EXPECT_EQ(row.amount, 30);
  EXPECT_EQ(row.captured, 0);
  EXPECT_TRUE(row.is_new);
  EXPECT_TRUE(row.dirty);

  EXPECT_EQ(st.decide(debit("d1", 71)).code, contract::shard_code::insufficient_funds);
  EXPECT_EQ(st.decide(hold("h2", 71)).code, contract::shard_code::insufficient_funds);
  EXPECT_FALSE(st.holds.contains(batch_state::hold_key("t1", "a1", "h2")));
  EXPECT_EQ(st.decide(debit("d2", 70)).status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, 30);
  EXPECT_EQ(acc().held, 30);
  EXPECT_EQ(st.decide(hold("h3", 1)).code, contract::shard_code::insufficient_funds);
}

TEST_F(Decide, CaptureWholeHold) {
  add_account("a1", 100);
  ASSERT_EQ(st.decide(hold("h1", 30)).status, reply_status::succeeded);
  reply c = st.decide(capture("h1"));
  EXPECT_EQ(c.status, reply_status::succeeded);
  EXPECT_EQ(c.amount, 30);
  EXPECT_EQ(after_of(c), (after{70, 0, 3}));
  EXPECT_EQ(c.ledger_seq, std::optional<std::int64_t>(first_seq));
  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].key, (op_key{"t1", "a1", "capture", "h1"}));
  EXPECT_EQ(st.ledger[0].delta, -30);
  EXPECT_EQ(st.ledger[0].balance_after, 70);
  EXPECT_EQ(held_row("h1").state, hold_state::captured);
  EXPECT_EQ(held_row("h1").captured, 30);
  EXPECT_EQ(acc().balance, 70);
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(op("capture", "h1").amount, 30);
}

TEST_F(Decide, PartialCaptureReleasesTheRest) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  reply c = st.decide(capture("h1", 12));
  EXPECT_EQ(c.status, reply_status::succeeded);
  EXPECT_EQ(c.amount, 12);
  EXPECT_EQ(c.balance_after, 88);
  EXPECT_EQ(c.held_after, 0);
  EXPECT_EQ(acc().balance, 88);
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(held_row("h1").state, hold_state::captured);
  EXPECT_EQ(held_row("h1").captured, 12);
  EXPECT_EQ(held_row("h1").amount, 30);
  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].delta, -12);
  // The released rest is available again.
  EXPECT_EQ(st.decide(debit("d1", 88)).status, reply_status::succeeded);
  // A release after the capture is refused and changes nothing.
  reply rel = st.decide(release("h1"));
  EXPECT_EQ(verdict_of(rel), (verdict{reply_status::rejected, contract::shard_code::hold_captured}));
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(acc().balance, 0);
}

TEST_F(Decide, PartialCaptureWithOtherHoldsKeepsThem) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  st.decide(hold("h2", 20));
  EXPECT_EQ(acc().held, 50);
  st.decide(capture("h1", 10));
  EXPECT_EQ(acc().balance, 90);
  EXPECT_EQ(acc().held, 20);  // only h1's 30 left the hold total
  EXPECT_EQ(held_row("h2").state, hold_state::held);
}

TEST_F(Decide, CaptureMoreThanHoldIsRejected) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  reply c = st.decide(capture("h1", 31));
  EXPECT_EQ(verdict_of(c), (verdict{reply_status::rejected, contract::shard_code::capture_exceeds_hold}));
  EXPECT_EQ(acc().balance, 100);
  EXPECT_EQ(acc().held, 30);
  EXPECT_EQ(held_row("h1").state, hold_state::held);
  EXPECT_TRUE(st.ledger.empty());
}

TEST_F(Decide, CaptureOfHoldLoadedFromStore) {
  add_account("a1", 100, 30, 4);
  add_hold("h1", 30);
  reply c = st.decide(capture("h1"));
  EXPECT_EQ(c.status, reply_status::succeeded);
  EXPECT_EQ(after_of(c), (after{70, 0, 5}));
  EXPECT_TRUE(held_row("h1").dirty);
  EXPECT_FALSE(held_row("h1").is_new);
}

TEST_F(Decide, DoubleCaptureSameContentIsReplayed) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  reply first = st.decide(capture("h1", 20));
  reply again = st.decide(capture("h1", 20));
  EXPECT_EQ(again.status, reply_status::succeeded);
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(without_replayed(again), without_replayed(first));
  EXPECT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(acc().balance, 80);
  // Other content for the same capture key is a conflict.
  const counts before = snapshot();
  EXPECT_EQ(st.decide(capture("h1")).status, reply_status::conflict);
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Decide, CaptureOfUnknownHoldIsRetriedAndStoresNothing) {
  add_account("a1", 100);
  const counts before = snapshot();
  reply r = st.decide(capture("h1"));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::retry, contract::shard_code::hold_not_found}));
  EXPECT_EQ(snapshot(), before);
  EXPECT_FALSE(st.operations.contains(flat("capture", "h1")));
  EXPECT_FALSE(acc().dirty);
  EXPECT_EQ(json::parse(contract::to_json_text(r)),
            json::parse(R"({"status":"retry","command":"capture","biz_id":"h1","code":"hold_not_found"})"));
  // Once the hold arrives, the same capture key succeeds.
  st.decide(hold("h1", 30));
  EXPECT_EQ(st.decide(capture("h1")).status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, 70);
}

TEST_F(Decide, ReleaseFreesTheHold) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  reply r = st.decide(release("h1"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(r.amount, 30);
  EXPECT_EQ(after_of(r), (after{100, 0, 3}));
  EXPECT_FALSE(r.ledger_seq.has_value());
  EXPECT_TRUE(st.ledger.empty());
  EXPECT_EQ(held_row("h1").state, hold_state::released);
  EXPECT_EQ(acc().held, 0);
  ASSERT_EQ(st.events.size(), 2u);
  EXPECT_EQ(st.events[1].event_type, "account.released");
  // Release is idempotent.
  reply again = st.decide(release("h1"));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(without_replayed(again), without_replayed(r));
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(st.events.size(), 2u);
}

TEST_F(Decide, CaptureAfterReleaseIsRejected) {
  add_account("a1", 100);
  st.decide(hold("h1", 30));
  st.decide(release("h1"));
  const counts before = snapshot();
  reply c = st.decide(capture("h1"));
  EXPECT_EQ(verdict_of(c), (verdict{reply_status::rejected, contract::shard_code::hold_released}));
  EXPECT_EQ(acc().balance, 100);
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(st.ledger.size(), before.ledger);
  EXPECT_EQ(st.events.size(), before.events);
  EXPECT_EQ(op("capture", "h1").state, op_state::rejected);
  EXPECT_TRUE(st.decide(capture("h1")).replayed);
}

TEST_F(Decide, ReleaseBeforeHoldLeavesTombstoneThatRefusesTheHold) {
  add_account("a1", 100, 0, 7);
  reply r = st.decide(release("h1"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(r.amount, 0);
  EXPECT_EQ(r.held_after, 0);
  EXPECT_EQ(r.version, 7);  // no account change, no event
  EXPECT_TRUE(st.events.empty());
  EXPECT_FALSE(acc().dirty);
  const auto& tomb = held_row("h1");
  EXPECT_EQ(tomb.state, hold_state::released);
  EXPECT_EQ(tomb.amount, 0);
  EXPECT_TRUE(tomb.is_new);
  EXPECT_TRUE(tomb.dirty);

  reply h = st.decide(hold("h1", 30));
  EXPECT_EQ(verdict_of(h), (verdict{reply_status::rejected, contract::shard_code::hold_released}));
  EXPECT_EQ(acc().held, 0);
  EXPECT_EQ(acc().version, 7);
  EXPECT_EQ(held_row("h1").state, hold_state::released);
  EXPECT_EQ(held_row("h1").amount, 0);
  EXPECT_EQ(op("hold", "h1").state, op_state::rejected);
  // A capture of the tombstone is refused too.
  EXPECT_EQ(st.decide(capture("h1")).code, contract::shard_code::hold_released);
  EXPECT_EQ(acc().balance, 100);
}

TEST_F(Decide, LateHoldRefusedByTombstoneLoadedFromStore) {
  add_account("a1", 100);
  add_hold("h1", 0, hold_state::released);
  reply h = st.decide(hold("h1", 30));
  EXPECT_EQ(h.code, contract::shard_code::hold_released);
  EXPECT_EQ(acc().held, 0);
}

// ---------------------------------------------------------------- refunds

TEST_F(Decide, CumulativeRefundsUpToTheOriginal) {
  add_account("a1", 100);
  reply d = st.decide(debit("d1", 60));
  ASSERT_EQ(d.status, reply_status::succeeded);
  const std::int64_t debit_seq = *d.ledger_seq;

  reply r1 = st.decide(refund("r1", 25, "d1"));
  EXPECT_EQ(r1.status, reply_status::succeeded);
  EXPECT_EQ(r1.balance_after, 65);
  EXPECT_EQ(op("debit", "d1").refunded, 25);
  EXPECT_TRUE(op("debit", "d1").dirty);
  ASSERT_EQ(st.ledger.size(), 2u);
  EXPECT_EQ(st.ledger[1].key, (op_key{"t1", "a1", "refund", "r1"}));
  EXPECT_EQ(st.ledger[1].delta, 25);
  EXPECT_EQ(st.ledger[1].reverses, std::optional<std::int64_t>(debit_seq));

  reply r2 = st.decide(refund("r2", 35, "d1"));
  EXPECT_EQ(r2.status, reply_status::succeeded);
  EXPECT_EQ(r2.balance_after, 100);
  EXPECT_EQ(op("debit", "d1").refunded, 60);

  reply r3 = st.decide(refund("r3", 1, "d1"));
  EXPECT_EQ(verdict_of(r3), (verdict{reply_status::rejected, contract::shard_code::refund_exceeds_original}));
  EXPECT_EQ(acc().balance, 100);
  EXPECT_EQ(op("debit", "d1").refunded, 60);
  EXPECT_EQ(st.ledger.size(), 3u);

  // Replaying a refund does not refund twice.
  reply r1b = st.decide(refund("r1", 25, "d1"));
  EXPECT_TRUE(r1b.replayed);
  EXPECT_EQ(op("debit", "d1").refunded, 60);
  EXPECT_EQ(acc().balance, 100);
}

TEST_F(Decide, RefundWithoutAmountGivesBackWhatIsLeft) {
  add_account("a1", 100);
  st.decide(hold("h1", 40));
  st.decide(capture("h1"));
  ASSERT_EQ(st.decide(refund("r1", 15, "h1", "capture")).status, reply_status::succeeded);

  reply rest = st.decide(refund("r2", 0, "h1", "capture"));
  EXPECT_EQ(rest.status, reply_status::succeeded);
  EXPECT_EQ(rest.amount, 25);
  EXPECT_EQ(acc().balance, 100);
  EXPECT_EQ(op("capture", "h1").refunded, 40);
  ASSERT_EQ(st.ledger.size(), 3u);  // the capture, r1, r2
  EXPECT_EQ(st.ledger.back().delta, 25);

  // Nothing left: the refund succeeds and writes no entry and no event.
  const std::size_t events = st.events.size();
  reply none = st.decide(refund("r3", 0, "h1", "capture"));
  EXPECT_EQ(none.status, reply_status::succeeded);
  EXPECT_EQ(none.amount, 0);
  EXPECT_FALSE(none.ledger_seq.has_value());
  EXPECT_EQ(st.ledger.size(), 3u);
  EXPECT_EQ(st.events.size(), events);
  EXPECT_EQ(acc().balance, 100);

  // Replayed, each answers what it did the first time.
  EXPECT_EQ(st.decide(refund("r2", 0, "h1", "capture")).amount, 25);
  EXPECT_TRUE(st.decide(refund("r3", 0, "h1", "capture")).replayed);
  EXPECT_EQ(op("capture", "h1").refunded, 40);
}

TEST_F(Decide, SingleRefundLargerThanOriginalIsRejected) {
  add_account("a1", 100);
  st.decide(debit("d1", 10));
  reply r = st.decide(refund("r1", 11, "d1"));
  EXPECT_EQ(r.code, contract::shard_code::refund_exceeds_original);
  EXPECT_EQ(op("debit", "d1").refunded, 0);
  EXPECT_EQ(acc().balance, 90);
}

TEST_F(Decide, RefundOfDebitLoadedFromStore) {
  add_account("a1", 40, 0, 3);
  const command d = debit("d1", 60);
  auto& stored = add_operation(d, op_state::succeeded, 60, 900);
  stored.refunded = 50;
  EXPECT_EQ(st.decide(refund("r1", 11, "d1")).code, contract::shard_code::refund_exceeds_original);
  reply ok = st.decide(refund("r2", 10, "d1"));
  EXPECT_EQ(ok.status, reply_status::succeeded);
  EXPECT_EQ(ok.balance_after, 50);
  EXPECT_EQ(op("debit", "d1").refunded, 60);
  EXPECT_TRUE(op("debit", "d1").dirty);
  EXPECT_FALSE(op("debit", "d1").is_new);  // updated, not inserted
  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].reverses, std::optional<std::int64_t>(900));
}

TEST_F(Decide, RefundOfCapture) {
  add_account("a1", 100);
  st.decide(hold("h1", 40));
  st.decide(capture("h1", 30));
  EXPECT_EQ(st.decide(refund("r1", 31, "h1", "capture")).code, contract::shard_code::refund_exceeds_original);
  reply r = st.decide(refund("r2", 30, "h1", "capture"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, 100);
  EXPECT_EQ(op("capture", "h1").refunded, 30);
}

TEST_F(Decide, RefundOfUnknownOriginalIsRetriedAndStoresNothing) {
  add_account("a1", 100);
  const counts before = snapshot();
  reply r = st.decide(refund("r1", 10, "d1"));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::retry, contract::shard_code::original_not_found}));
  EXPECT_EQ(snapshot(), before);
  EXPECT_FALSE(st.operations.contains(flat("refund", "r1")));
  EXPECT_EQ(acc().balance, 100);
  // When the original becomes visible, the same refund key succeeds.
  st.decide(debit("d1", 10));
  EXPECT_EQ(st.decide(refund("r1", 10, "d1")).status, reply_status::succeeded);
  EXPECT_EQ(acc().balance, 100);
}

TEST_F(Decide, RefundOfRejectedOriginalIsRejected) {
  add_account("a1", 5);
  ASSERT_EQ(st.decide(debit("d1", 10)).status, reply_status::rejected);
  reply r = st.decide(refund("r1", 10, "d1"));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::rejected, contract::shard_code::original_not_succeeded}));
  EXPECT_EQ(acc().balance, 5);
  EXPECT_EQ(op("refund", "r1").state, op_state::rejected);
  EXPECT_EQ(op("debit", "d1").refunded, 0);
}

TEST_F(Decide, RefundOfCancelledOriginalIsRejected) {
  add_account("a1", 100);
  st.decide(cancel_key("debit", "d1"));
  EXPECT_EQ(st.decide(refund("r1", 10, "d1")).code, contract::shard_code::original_not_succeeded);
  EXPECT_EQ(acc().balance, 100);
}

TEST_F(Decide, RefundOverflowIsRejected) {
  add_account("a1", i64max - 5);
  add_operation(debit("d1", 100), op_state::succeeded, 100, 900);
  reply r = st.decide(refund("r1", 10, "d1"));
  EXPECT_EQ(r.code, contract::shard_code::balance_overflow);
  EXPECT_EQ(acc().balance, i64max - 5);
  EXPECT_EQ(op("debit", "d1").refunded, 0);
}

// ---------------------------------------------------------------- cancel_key

TEST_F(Decide, CancelKeyBeforeCreditTombstonesIt) {
  add_account("a1", 10, 0, 2);
  reply k = st.decide(cancel_key("credit", "c1"));
  EXPECT_EQ(k.status, reply_status::cancelled);
  EXPECT_FALSE(k.replayed);
  EXPECT_EQ(k.kind, command_kind::cancel_key);
  EXPECT_EQ(k.biz_id, "c1");
  const auto& tomb = op("credit", "c1");
  EXPECT_EQ(tomb.state, op_state::cancelled);
  EXPECT_TRUE(tomb.is_new);
  EXPECT_EQ(tomb.request_hash, cancel_key("credit", "c1").request_hash);
  EXPECT_TRUE(st.events.empty());

  const counts before = snapshot();
  reply late = st.decide(credit("c1", 100));
  EXPECT_EQ(late.status, reply_status::cancelled);
  EXPECT_EQ(late.kind, command_kind::credit);
  EXPECT_EQ(late.biz_id, "c1");
  EXPECT_FALSE(late.replayed);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(acc().balance, 10);
  EXPECT_TRUE(st.ledger.empty());
  EXPECT_EQ(json::parse(contract::to_json_text(late)),
            json::parse(R"({"status":"cancelled","command":"credit","biz_id":"c1","replayed":false})"));

  // cancel_key is idempotent.
  reply k2 = st.decide(cancel_key("credit", "c1"));
  EXPECT_EQ(k2.status, reply_status::cancelled);
  EXPECT_TRUE(k2.replayed);
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Decide, CancelKeyAfterCreditReportsAlreadyApplied) {
  add_account("a1", 10);
  reply c = st.decide(credit("c1", 100));
  const counts before = snapshot();
  reply k = st.decide(cancel_key("credit", "c1"));
  EXPECT_EQ(k.status, reply_status::already_applied);
  ASSERT_TRUE(k.applied.has_value());
  EXPECT_EQ(k.applied->state, op_state::succeeded);
  EXPECT_FALSE(k.applied->code.has_value());
  EXPECT_FALSE(k.code.has_value());
  EXPECT_EQ(k.amount, 100);
  EXPECT_EQ(k.kind, command_kind::cancel_key);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(op("credit", "c1").state, op_state::succeeded);
  EXPECT_EQ(acc().balance, 110);
  EXPECT_EQ(json::parse(contract::to_json_text(k)), json::parse(R"({"status":"already_applied","command":"cancel_key",
    "biz_id":"c1","replayed":false,"applied":{"state":"succeeded","amount":100},"amount":100,
    "balance_after":110,"held_after":0,"version":2,"ledger_seq":1001})"));
  // The credit still replays as succeeded.
  EXPECT_TRUE(st.decide(credit("c1", 100)).replayed);
  EXPECT_EQ(c.ledger_seq, k.ledger_seq);
}

TEST_F(Decide, CancelKeyAfterRejectionReportsTheRejection) {
  add_account("a1", 10);
  st.decide(debit("d1", 80));
  reply k = st.decide(cancel_key("debit", "d1"));
  EXPECT_EQ(k.status, reply_status::already_applied);
  ASSERT_TRUE(k.applied.has_value());
  EXPECT_EQ(k.applied->state, op_state::rejected);
  EXPECT_EQ(k.applied->code, contract::shard_code::insufficient_funds);
  EXPECT_FALSE(k.code.has_value());
  json j = json::parse(contract::to_json_text(k));
  EXPECT_EQ(j["applied"], json::parse(R"({"state":"rejected","amount":0,"code":"insufficient_funds"})"));
  EXPECT_FALSE(j.contains("code"));
}

TEST_F(Decide, CancelKeyBeforeHoldRefusesLateHold) {
  add_account("a1", 100);
  st.decide(cancel_key("hold", "h1"));
  reply h = st.decide(hold("h1", 30));
  EXPECT_EQ(h.status, reply_status::cancelled);
  EXPECT_EQ(acc().held, 0);
  EXPECT_FALSE(st.holds.contains(batch_state::hold_key("t1", "a1", "h1")));
}

// ---------------------------------------------------------------- account status

TEST_F(Decide, FrozenAccountIsRetriedAndStoresNothing) {
  add_account("a1", 100, 20, 4, account_status::frozen);
  add_hold("h1", 20);
  add_operation(debit("d0", 10), op_state::succeeded, 10, 800);
  const counts before = snapshot();
  for (const command& c :
       {credit("c1", 1), debit("d1", 1), hold("h2", 1), capture("h1"), release("h1"), refund("r1", 1, "d0")}) {
    reply r = st.decide(c);
    EXPECT_EQ(r.status, reply_status::retry) << to_string(c.kind);
    EXPECT_EQ(r.code, contract::shard_code::account_frozen) << to_string(c.kind);
    EXPECT_EQ(snapshot(), before) << to_string(c.kind);
  }
  EXPECT_FALSE(acc().dirty);
  EXPECT_EQ(held_row("h1").state, hold_state::held);
  EXPECT_FALSE(held_row("h1").dirty);
}

TEST_F(Decide, ClosedAccountRejects) {
  add_account("a1", 0, 0, 4, account_status::closed);
  reply r = st.decide(credit("c1", 1));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::rejected, contract::shard_code::account_closed}));
  EXPECT_EQ(op("credit", "c1").state, op_state::rejected);
  EXPECT_EQ(acc().balance, 0);
}

TEST_F(Decide, UnknownAccountIsRejectedAndStored) {
  reply r = st.decide(credit("c1", 100, "nobody"));
  EXPECT_EQ(verdict_of(r), (verdict{reply_status::rejected, contract::shard_code::account_not_found}));
  EXPECT_TRUE(st.accounts.empty());
  EXPECT_TRUE(st.ledger.empty());
  EXPECT_TRUE(st.events.empty());
  EXPECT_EQ(op("credit", "c1", "nobody").state, op_state::rejected);
  EXPECT_EQ(op("credit", "c1", "nobody").reason, contract::shard_code::account_not_found);
  reply again = st.decide(credit("c1", 100, "nobody"));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.code, contract::shard_code::account_not_found);
  for (const command& c : {debit("d1", 1, "nobody"), hold("h1", 1, "nobody"), capture("h1", 0, "nobody")}) {
    reply x = st.decide(c);
    EXPECT_EQ(x.status, reply_status::rejected) << to_string(c.kind);
    EXPECT_EQ(x.code, contract::shard_code::account_not_found) << to_string(c.kind);
  }
  EXPECT_TRUE(st.accounts.empty());
}

// ---------------------------------------------------------------- open_account

TEST_F(Decide, OpenAccountCreatesVersionOneWithOpeningEntry) {
  reply r = st.decide(open_cmd("a1"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_EQ(r.kind, command_kind::open_account);
  EXPECT_EQ(r.biz_id, "open");
  EXPECT_EQ(after_of(r), (after{0, 0, 1}));
  EXPECT_EQ(r.ledger_seq, std::optional<std::int64_t>(first_seq));

  const auto& a = acc();
  EXPECT_EQ(a.tenant, "t1");
  EXPECT_EQ(a.account_id, "a1");
  EXPECT_EQ(a.balance, 0);
  EXPECT_EQ(a.held, 0);
  EXPECT_EQ(a.status, account_status::active);
  EXPECT_EQ(a.version, 1);
  EXPECT_TRUE(a.is_new);
  EXPECT_TRUE(a.dirty);

  ASSERT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.ledger[0].seq, first_seq);
  EXPECT_EQ(st.ledger[0].key, (op_key{"t1", "a1", "open_account", "open"}));
  EXPECT_EQ(st.ledger[0].delta, 0);
  EXPECT_EQ(st.ledger[0].balance_after, 0);
  EXPECT_FALSE(st.ledger[0].reverses.has_value());

  ASSERT_EQ(st.events.size(), 1u);
  EXPECT_EQ(st.events[0].event_type, "account.opened");
  EXPECT_EQ(st.events[0].version, 1);
  EXPECT_EQ(st.events[0].tenant, "t1");
  EXPECT_EQ(st.events[0].account_id, "a1");
  EXPECT_EQ(json::parse(st.events[0].payload), json::parse(R"({"tenant":"t1","account_id":"a1","balance":0,
    "held":0,"available":0,"status":"active","version":1,"cause":{"type":"open_account","biz_id":"open"},
    "next_expiry":null})"));

  // Opening again with the same key is a replay.
  reply again = st.decide(open_cmd("a1"));
  EXPECT_EQ(again.status, reply_status::succeeded);
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(without_replayed(again), without_replayed(r));
  EXPECT_EQ(st.ledger.size(), 1u);
  EXPECT_EQ(st.events.size(), 1u);
  EXPECT_EQ(acc().version, 1);
}

TEST_F(Decide, OpenExistingAccountWithOtherKeyChangesNothing) {
  add_account("a1", 70, 10, 8);
  reply r = st.decide(open_cmd("a1", "second-open"));
  EXPECT_EQ(r.status, reply_status::succeeded);
  EXPECT_FALSE(r.replayed);
  EXPECT_EQ(after_of(r), (after{70, 10, 8}));
  EXPECT_FALSE(r.ledger_seq.has_value());
  EXPECT_TRUE(st.ledger.empty());
  EXPECT_TRUE(st.events.empty());
  EXPECT_EQ(acc().balance, 70);
  EXPECT_FALSE(acc().dirty);
}

TEST_F(Decide, OpenThenUseInTheSameBatch) {
  st.decide(open_cmd("a1"));
  st.decide(open_cmd("a2"));
  EXPECT_EQ(st.decide(credit("c1", 50)).version, 2);
  EXPECT_EQ(st.decide(credit("c1", 50, "a2")).version, 2);  // same biz_id, other account: another key
  EXPECT_EQ(acc("a1").balance, 50);
  EXPECT_EQ(acc("a2").balance, 50);
  ASSERT_EQ(st.ledger.size(), 4u);
  // Sequence numbers are taken in decision order from the reserved ones.
  for (std::size_t i = 0; i < st.ledger.size(); ++i) EXPECT_EQ(st.ledger[i].seq, first_seq + std::int64_t(i));
  EXPECT_EQ(st.next_seq, 4u);
}

// ---------------------------------------------------------------- events

TEST_F(Decide, EveryStateChangeEmitsOneEventWithConsecutiveVersions) {
  st.decide(open_cmd("a1"));          // v1 opened
  st.decide(credit("c1", 100));       // v2 credited
  st.decide(debit("d-rej", 1000));    // rejected: no event
  st.decide(hold("h1", 30));          // v3 held
  st.decide(debit("d1", 20));         // v4 debited
  st.decide(capture("h1", 10));       // v5 captured
  st.decide(credit("c1", 100));       // replay: no event
  st.decide(hold("h2", 5));           // v6 held
  st.decide(release("h2"));           // v7 released
  st.decide(release("h-none"));       // tombstone: no account change
  st.decide(capture("h-unknown"));    // retry: nothing
  st.decide(refund("r1", 20, "d1"));  // v8 refunded
  st.decide(debit("d1", 21));         // conflict: nothing

  const std::vector<std::string> types = {"account.opened",   "account.credited", "account.held",
                                          "account.debited",  "account.captured", "account.held",
                                          "account.released", "account.refunded"};
  ASSERT_EQ(st.events.size(), types.size());
  for (std::size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(st.events[i].event_type, types[i]) << i;
    EXPECT_EQ(st.events[i].version, std::int64_t(i) + 1) << i;
    EXPECT_EQ(json::parse(st.events[i].payload)["version"], std::int64_t(i) + 1) << i;
  }
  EXPECT_EQ(acc().version, 8);
  // 100 - 20 - 10 + 20
  EXPECT_EQ(acc().balance, 90);
  EXPECT_EQ(acc().held, 0);

  // The payload is the account after the change, with its cause.
  EXPECT_EQ(json::parse(st.events[2].payload), json::parse(R"({"tenant":"t1","account_id":"a1","balance":100,
    "held":30,"available":70,"status":"active","version":3,"cause":{"type":"hold","biz_id":"h1"},
    "next_expiry":null})"));
  EXPECT_EQ(json::parse(st.events[4].payload)["balance"], 70);
  EXPECT_EQ(json::parse(st.events[4].payload)["held"], 0);

  // Balance equals its ledger: opening + Σ deltas.
  std::int64_t sum = 0;
  for (const auto& e : st.ledger) sum += e.delta;
  EXPECT_EQ(sum, acc().balance);
  EXPECT_EQ(st.ledger.back().balance_after, acc().balance);
}

TEST_F(Decide, EventVersionsContinueFromLoadedVersion) {
  add_account("a1", 100, 0, 41);
  st.decide(credit("c1", 1));
  st.decide(debit("d1", 1));
  ASSERT_EQ(st.events.size(), 2u);
  EXPECT_EQ(st.events[0].version, 42);
  EXPECT_EQ(st.events[1].version, 43);
}

TEST_F(Decide, Deterministic) {
  add_account("a1", 100);
  add_account("a2", 5);
  batch_state copy = st;
  const std::vector<command> cmds = {debit("d1", 80), debit("d2", 80),  credit("c1", 7, "a2"),
                                     hold("h1", 10),  capture("h1", 4), refund("r1", 80, "d1")};
  for (const auto& c : cmds) EXPECT_EQ(contract::to_json_text(st.decide(c)), contract::to_json_text(copy.decide(c)));
  ASSERT_EQ(st.events.size(), copy.events.size());
  for (std::size_t i = 0; i < st.events.size(); ++i) EXPECT_EQ(st.events[i].payload, copy.events[i].payload);
  EXPECT_EQ(st.ledger.size(), copy.ledger.size());
}

// ---------------------------------------------------------------- reply_json

TEST(ReplyJson, SucceededShape) {
  batch_state st;
  st.free_seqs = {77};
  st.accounts.emplace(batch_state::account_key("t1", "a1"),
                      account_row{"t1", "a1", 100, 10, account_status::active, 3, false, false, 1});
  lot_row lot;
  lot.tenant = "t1";
  lot.account_id = "a1";
  lot.lot_id = 1;
  lot.granted = lot.remaining = 100;
  lot.held = 10;
  lot.expires_at = 1798761600000;  // 2027-01-01
  lot.rule_version = "r7";
  st.lots[batch_state::account_key("t1", "a1")] = {lot};
  reply r = st.decide(
      parsed(json{{"type", "debit"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "d1"}, {"amount", 80}}));
  EXPECT_EQ(json::parse(contract::to_json_text(r)),
            json::parse(R"({"status":"succeeded","command":"debit","biz_id":"d1",
    "replayed":false,"amount":80,"balance_after":20,"held_after":10,"version":4,"ledger_seq":77,
    "lots":[{"lot_id":1,"amount":80,"expires_at":"2027-01-01T00:00:00.000Z","rule_version":"r7"}]})"));
}

TEST(ReplyJson, RejectedShapeHasNullLedgerSeq) {
  batch_state st;
  st.accounts.emplace(batch_state::account_key("t1", "a1"),
                      account_row{"t1", "a1", 100, 10, account_status::active, 3, false, false});
  reply r = st.decide(
      parsed(json{{"type", "debit"}, {"tenant", "t1"}, {"account_id", "a1"}, {"biz_id", "d1"}, {"amount", 91}}));
  EXPECT_EQ(json::parse(contract::to_json_text(r)), json::parse(R"({"status":"rejected","command":"debit","biz_id":"d1",
    "code":"insufficient_funds","replayed":false,"amount":0,"balance_after":100,"held_after":10,"version":3,
    "ledger_seq":null})"));
}

TEST(ReplyJson, StatusNames) {
  EXPECT_EQ(to_string(reply_status::succeeded), "succeeded");
  EXPECT_EQ(to_string(reply_status::rejected), "rejected");
  EXPECT_EQ(to_string(reply_status::conflict), "conflict");
  EXPECT_EQ(to_string(reply_status::cancelled), "cancelled");
  EXPECT_EQ(to_string(reply_status::already_applied), "already_applied");
  EXPECT_EQ(to_string(reply_status::retry), "retry");
  EXPECT_EQ(account_status_from("frozen"), std::optional<account_status>(account_status::frozen));
  EXPECT_FALSE(account_status_from("open").has_value());
  EXPECT_EQ(operation_state_from("cancelled"), std::optional<op_state>(op_state::cancelled));
  EXPECT_EQ(hold_state_from("captured"), std::optional<hold_state>(hold_state::captured));
  EXPECT_FALSE(hold_state_from("").has_value());
  EXPECT_EQ(to_string(hold_state::released), "released");
  EXPECT_EQ(to_string(op_state::rejected), "rejected");
  EXPECT_EQ(to_string(account_status::closed), "closed");
}

}  // namespace
