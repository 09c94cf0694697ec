// Grant lots and their expiry on a real shard and PostgreSQL: consumption
// order, expiry at a given instant (the shard's clock moved through
// /v1/admin/clock), expiry racing concurrent deductions, a transfer's
// expiries kept, refunds into expired lots, and reconciliation of lots.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/contract/account_document.hpp"
#include "common/time/rfc3339.hpp"
#include "tests/account_shard/shard_fixture.hpp"

namespace tally::test {
namespace {

std::int64_t system_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Whole seconds, so that every figure is exact in both directions.
std::int64_t in_hours(double hours) { return (system_ms() / 1000 + static_cast<std::int64_t>(hours * 3600)) * 1000; }

class LotsTest : public ShardTest {
 protected:
  void SetUp() override {
    ShardTest::SetUp();
    // The expiry job every 20 ms; the shard's clock movable; a short grace for refunds into expired lots.
    restart({"--testing.clock_control=true", "--expiry.interval_ms=20", "--refund.expired_lot_grace_ms=3600000"});
  }
  // Moves the shard's clock to `at` (unix ms).
  void set_clock(std::int64_t at) {
    json body{{"offset_ms", at - system_ms()}};
    auto r = client_->call("POST", "/v1/admin/clock", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  json credit(const std::string& account, const std::string& id, std::int64_t amount,
              std::optional<std::int64_t> expires_at, const std::string& rule_version = "") {
    json extra = json::object();
    if (expires_at) extra["expires_at"] = time::rfc3339_ms(*expires_at);
    if (!rule_version.empty()) extra["rule_version"] = rule_version;
    return send(command("credit", account, id, amount, extra));
  }
  // Opens alice with `expiring` units (credit c1) in a lot that expires in an
  // hour and `lasting` ones (credit c2, if any) that never expire; returns
  // when the first lot expires.
  std::int64_t alice_with_a_lot_expiring(std::int64_t expiring, std::int64_t lasting) {
    open("alice");
    const auto at = in_hours(1);
    credit("alice", "c1", expiring, at);
    if (lasting > 0) credit("alice", "c2", lasting, std::nullopt);
    return at;
  }
  json lots(const std::string& account, const std::string& query = "state=all") {
    auto r = client_->call("GET", "/v1/accounts/t1/" + account + "/lots?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }
  json lot(const std::string& account, std::int64_t id) {
    const auto all = lots(account);
    for (const auto& l : all["lots"])
      if (l["lot_id"] == id) return l;
    ADD_FAILURE() << "no lot " << id << " on " << account;
    return {};
  }
  // Clean both ways: what was written since the last run, then everything.
  void expect_reconciled() {
    for (const auto* mode : {"incremental", "full"}) {
      auto report = client_->call("GET", std::string("/v1/reconciliation?freeze=false&mode=") + mode).json();
      EXPECT_EQ(report["differences"], 0) << report.dump();
    }
  }
};

TEST_F(LotsTest, DebitsTakeFirstToExpireAcrossThreeLots) {
  open("alice");
  const auto late = in_hours(3), early = in_hours(1);
  credit("alice", "c1", 10, late);
  credit("alice", "c2", 10, std::nullopt);
  credit("alice", "c3", 10, early);
  auto d = send(command("debit", "alice", "d1", 15));
  ASSERT_EQ(d["status"], "succeeded") << d.dump();
  ASSERT_EQ(d["lots"].size(), 2u) << d.dump();
  EXPECT_EQ(d["lots"][0]["lot_id"], 3);
  EXPECT_EQ(d["lots"][0]["amount"], 10);
  EXPECT_EQ(d["lots"][1]["lot_id"], 1);
  EXPECT_EQ(d["lots"][1]["amount"], 5);

  // Read back from the database: consumption order, states, figures.
  auto all = lots("alice")["lots"];
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["lot_id"], 3);
  EXPECT_EQ(all[0]["state"], "exhausted");
  EXPECT_EQ(all[0]["expires_at"], time::rfc3339_ms(early));
  EXPECT_EQ(all[1]["lot_id"], 1);
  EXPECT_EQ(all[1]["remaining"], 5);
  EXPECT_EQ(all[2]["lot_id"], 2);
  EXPECT_TRUE(all[2]["expires_at"].is_null());
  auto open_only = lots("alice", "state=open")["lots"];
  EXPECT_EQ(open_only.size(), 2u);
  // Pages of one, following next.
  auto page = lots("alice", "state=all&limit=1");
  std::vector<std::int64_t> seen{page["lots"][0]["lot_id"].get<std::int64_t>()};
  while (!page["next"].is_null()) {
    page = lots("alice", "state=all&limit=1&after=" + page["next"].get<std::string>());
    for (const auto& l : page["lots"]) seen.push_back(l["lot_id"]);
  }
  EXPECT_EQ(seen, (std::vector<std::int64_t>{3, 1, 2}));
  auto account = client_->call("GET", "/v1/accounts/t1/alice").json();
  EXPECT_EQ(account["next_expiry"], (json{{"at", time::rfc3339_ms(late)}, {"amount", 5}}));
  expect_reconciled();
}

// A batch reads an account's non-expiring lots only as far as its debits
// and holds need (store/batch.cpp): with forty of them open, value held in
// the first ones, and deductions arriving together so that batches carry
// several, every deduction still takes the expiring lot first and then the
// non-expiring ones in grant order, past the held value, and the ones
// beyond what was taken stay whole.
// Forty non-expiring lots (each of its own rule version: value on the same
// terms would share one lot).
TEST_F(LotsTest, DeductionsAcrossManyNonExpiringLotsTakeThemInGrantOrderPastHeldValue) {
  open("alice");
  for (int i = 1; i <= 40; ++i) credit("alice", "c" + std::to_string(i), 5, std::nullopt, "r" + std::to_string(i));
  credit("alice", "c41", 3, in_hours(2));
  auto hold = send(command("hold", "alice", "h1", 8));
  ASSERT_EQ(hold["status"], "succeeded") << hold.dump();
  ASSERT_EQ(hold["lots"].size(), 2u) << hold.dump();
  EXPECT_EQ(hold["lots"][0]["lot_id"], 41) << "the expiring lot first";
  EXPECT_EQ(hold["lots"][0]["amount"], 3);
  EXPECT_EQ(hold["lots"][1]["lot_id"], 1);
  EXPECT_EQ(hold["lots"][1]["amount"], 5);

  const auto replies =
      send_at_once(12, [](std::size_t i) { return command("debit", "alice", "d" + std::to_string(i), 7); });
  for (const auto& r : replies) ASSERT_EQ(r["status"], "succeeded") << r.dump();

  // 84 taken from lots 2 onwards (lot 1 and the expiring lot are held): lots 2 to 17 whole, 4 of lot 18.
  for (std::int64_t id = 2; id <= 17; ++id) EXPECT_EQ(lot("alice", id)["state"], "exhausted") << "lot " << id;
  EXPECT_EQ(lot("alice", 18)["remaining"], 1);
  for (std::int64_t id = 19; id <= 40; ++id) EXPECT_EQ(lot("alice", id)["remaining"], 5) << "lot " << id;
  EXPECT_EQ(lot("alice", 1)["held"], 5);
  EXPECT_EQ(balance("alice"), 40 * 5 + 3 - 12 * 7);
  // All that is left unheld, in one deduction; one unit more is refused.
  auto rest = send(command("debit", "alice", "all", 40 * 5 + 3 - 12 * 7 - 8));
  EXPECT_EQ(rest["status"], "succeeded") << rest.dump();
  auto more = send(command("debit", "alice", "more", 1));
  EXPECT_EQ(more["code"], "insufficient_funds") << more.dump();
  expect_reconciled();
}

// The batches of 1,000 credits: 100, or TALLY_LOT_CREDIT_BATCHES (the
// sanitizer run looks for memory errors, not for scale).
int credit_batches() {
  const char* v = std::getenv("TALLY_LOT_CREDIT_BATCHES");
  return v ? std::max(1, std::atoi(v)) : 100;
}

// 100,000 credits on three terms (two expiries and none), 1,000 a batch:
// three open lots, each granted what its credits gave, and a deduction
// still reads three lots; reconciliation matches each lot with its
// operations.
TEST_F(LotsTest, ManyCreditsOnFewTermsLeaveAsManyOpenLots) {
  // A thousand commands on one account per batch: admission off, so that
  // each waits its turn on a slow machine instead of being refused busy.
  restart({"--admission.max_wait_ms=0"});
  open("bob");
  const std::vector<std::optional<std::int64_t>> terms{in_hours(1), in_hours(2), std::nullopt};
  const int batches = credit_batches();
  std::int64_t credited = 0;  // 1, 2 and 3 in turn
  for (int b = 0; b < batches; ++b) {
    json batch{{"commands", json::array()}};
    for (int i = 0; i < 1000; ++i) {
      const int n = b * 1000 + i;
      credited += 1 + n % 3;
      json c = command("credit", "bob", "m" + std::to_string(n), 1 + n % 3);
      if (const auto& at = terms[static_cast<std::size_t>(n % 3)]) c["expires_at"] = time::rfc3339_ms(*at);
      batch["commands"].push_back(std::move(c));
    }
    auto r = client_->call("POST", "/v1/batch", batch.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const auto replies = r.json();  // bound first: a range-for over a temporary's member dangles
    for (const auto& one : replies["results"]) ASSERT_EQ(one["status"], "succeeded") << one.dump();
  }
  const auto open_lots = lots("bob", "state=open")["lots"];
  ASSERT_EQ(open_lots.size(), 3u) << open_lots.dump();
  std::int64_t granted = 0;
  for (const auto& l : open_lots) granted += l["granted"].get<std::int64_t>();
  EXPECT_EQ(granted, balance("bob"));
  EXPECT_EQ(balance("bob"), credited);
  auto d = send(command("debit", "bob", "d1", credited * 3 / 4));
  ASSERT_EQ(d["status"], "succeeded") << d.dump();
  EXPECT_EQ(d["lots"].size(), 3u) << d.dump();
  EXPECT_EQ(count("lot"), 3);
  expect_reconciled();
}

TEST_F(LotsTest, ALotExpiresAtItsInstantOnceAndOnlyItsUnheldRemainder) {
  const auto at = alice_with_a_lot_expiring(10, 0);
  set_clock(at - 2000);  // two seconds before
  EXPECT_EQ(send(command("debit", "alice", "d1", 1))["status"], "succeeded");
  EXPECT_EQ(send(command("hold", "alice", "h1", 3))["status"], "succeeded");
  EXPECT_EQ(lot("alice", 1)["state"], "open");
  EXPECT_EQ(balance("alice"), 9);

  set_clock(at);
  ASSERT_TRUE(eventually([&] { return lot("alice", 1)["state"] == "expired"; })) << lot("alice", 1).dump();
  EXPECT_EQ(balance("alice"), 3) << "the held 3 stay until the hold ends";
  auto entry = query_rows(db_, "SELECT delta FROM ledger_entry WHERE account_id = 'alice' AND biz_type = 'expire'");
  ASSERT_EQ(entry.size(), 1u);
  EXPECT_EQ(entry[0][0], "-6");
  auto refused = send(command("debit", "alice", "d2", 1));
  EXPECT_EQ(refused["status"], "rejected");
  EXPECT_EQ(refused["code"], "insufficient_funds");
  // A second expiry of the same lot is the stored one, not a second effect.
  auto again = send(command("expire", "alice", "1"));
  EXPECT_EQ(again["status"], "succeeded");
  EXPECT_EQ(again["replayed"], true);
  EXPECT_EQ(balance("alice"), 3);
  // The held part expires when its hold is released.
  EXPECT_EQ(send(command("release", "alice", "h1"))["status"], "succeeded");
  EXPECT_EQ(balance("alice"), 0);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM ledger_entry WHERE biz_type = 'expire'"), 2);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM outbox_event WHERE event_type = 'account.expired'"), 1);
  expect_reconciled();
}

TEST_F(LotsTest, ExpiryRacing32DeductionsNeverTakesAUnitTwice) {
  const auto at = alice_with_a_lot_expiring(100, 20);
  set_clock(at - 500);
  std::atomic<int> started{0};
  std::vector<json> replies(32);
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&, i] {
      http_client c(port_);
      ++started;
      replies[static_cast<std::size_t>(i)] =
          send_command(c, command("debit", "alice", "d" + std::to_string(i), 7).dump()).json();
    });
  while (started < 16) std::this_thread::yield();
  set_clock(at);  // the expiry comes while the deductions run
  for (auto& t : threads) t.join();
  ASSERT_TRUE(eventually([&] { return lot("alice", 1)["state"] != "open"; }));
  std::int64_t debited = 0;
  for (const auto& r : replies) {
    ASSERT_TRUE(r["status"] == "succeeded" || (r["status"] == "rejected" && r["code"] == "insufficient_funds"))
        << r.dump();
    if (r["status"] == "succeeded") debited += 7;
  }
  const auto expired = -query_int(db_, "SELECT coalesce(sum(delta), 0) FROM ledger_entry WHERE biz_type = 'expire'");
  EXPECT_GE(balance("alice"), 0);
  EXPECT_EQ(balance("alice") + debited + expired, 120) << "every unit is accounted for";
  EXPECT_EQ(lot("alice", 1)["expired"], expired);
  expect_reconciled();
}

TEST_F(LotsTest, ATransfersDestinationKeepsTheSourceExpiries) {
  open("alice");
  open("bob");
  const auto soon = in_hours(1), later = in_hours(2);
  credit("alice", "c1", 10, later);
  credit("alice", "c2", 10, soon);
  credit("alice", "c3", 10, std::nullopt);
  // As the orchestrator runs a transfer: hold the source, credit the
  // destination with the hold's lots grouped by expiry, capture.
  auto held = send(command("hold", "alice", "t1-hold", 25));
  ASSERT_EQ(held["status"], "succeeded");
  json parts = json::array();
  for (const auto& l : held["lots"]) parts.push_back({{"amount", l["amount"]}, {"expires_at", l["expires_at"]}});
  auto credited = send(command("credit", "bob", "t1-credit", 25, {{"lots", parts}}));
  ASSERT_EQ(credited["status"], "succeeded") << credited.dump();
  EXPECT_EQ(send(command("capture", "alice", "t1-hold"))["status"], "succeeded");
  auto bob = lots("bob")["lots"];
  ASSERT_EQ(bob.size(), 3u);
  EXPECT_EQ(bob[0]["expires_at"], time::rfc3339_ms(soon));
  EXPECT_EQ(bob[0]["remaining"], 10);
  EXPECT_EQ(bob[1]["expires_at"], time::rfc3339_ms(later));
  EXPECT_EQ(bob[1]["remaining"], 10);
  EXPECT_TRUE(bob[2]["expires_at"].is_null());
  EXPECT_EQ(bob[2]["remaining"], 5);
  // A replayed hold names the same lots, so a re-driven transfer credits the same split.
  EXPECT_EQ(send(command("hold", "alice", "t1-hold", 25))["lots"], held["lots"]);
  expect_reconciled();
}

TEST_F(LotsTest, RefundIntoAnExpiredLotGoesToAGraceLot) {
  const auto at = alice_with_a_lot_expiring(10, 5);
  EXPECT_EQ(send(command("debit", "alice", "d1", 12))["status"], "succeeded");  // 10 from lot 1, 2 from lot 2
  const auto later = at + 60'000;
  set_clock(later);
  auto refund = send(command("refund", "alice", "r1", 6, {{"original_type", "debit"}, {"original_id", "d1"}}));
  ASSERT_EQ(refund["status"], "succeeded") << refund.dump();
  // Most recently consumed first: 2 back to lot 2; the 4 that lot 1 gave go to a new lot.
  EXPECT_EQ(lot("alice", 2)["remaining"], 5);
  auto grace = lot("alice", 3);
  EXPECT_EQ(grace["origin"], "refund");
  EXPECT_EQ(grace["granted"], 4);
  EXPECT_EQ(grace["grace_ms"], 3600000);
  auto expires = time::parse_rfc3339_ms(grace["expires_at"].get<std::string>());
  ASSERT_TRUE(expires.has_value());
  EXPECT_NEAR(static_cast<double>(*expires), static_cast<double>(later + 3600000), 5000.0);
  // Replayed: no second effect.
  auto again = send(command("refund", "alice", "r1", 6, {{"original_type", "debit"}, {"original_id", "d1"}}));
  EXPECT_EQ(again["replayed"], true);
  EXPECT_EQ(balance("alice"), 9);
  expect_reconciled();
}

TEST_F(LotsTest, BadLotInputIsRefusedAndWritesNothing) {
  open("alice");
  const auto before = count("operation") + count("lot") + count("ledger_entry");
  for (const json& extra : {json{{"expires_at", "tomorrow"}}, json{{"expires_at", "2027-01-01T00:00:00+01:00"}},
                            json{{"expires_at", 1798761600}}, json{{"rule_version", "bad version"}},
                            json{{"lots", json::array({{{"amount", 3}}})}},
                            json{{"lots", json::array({{{"amount", 5}, {"colour", "red"}}})}}}) {
    auto r = client_->call("POST", "/v1/commands", command("credit", "alice", "c1", 5, extra).dump());
    EXPECT_EQ(r.status, 400) << extra.dump() << " " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "invalid_request");
  }
  EXPECT_EQ(count("operation") + count("lot") + count("ledger_entry"), before);
  EXPECT_EQ(client_->call("GET", "/v1/accounts/t1/alice/lots?state=spent").status, 400);
  EXPECT_EQ(client_->call("GET", "/v1/accounts/t1/alice/lots?after=x").status, 400);
  EXPECT_EQ(client_->call("GET", "/v1/accounts/t1/nobody/lots").status, 404);
}

TEST_F(LotsTest, ReconciliationFindsALotThatDisagreesAndFreezes) {
  open("alice");
  credit("alice", "c1", 10, std::nullopt);
  expect_reconciled();
  // A change by hand writes no entry: a full run reads every account.
  exec_sql(db_, "UPDATE lot SET remaining = remaining - 1, granted = granted WHERE account_id = 'alice'");
  auto report = client_->call("GET", "/v1/reconciliation?mode=full").json();
  ASSERT_EQ(report["differences"], 1) << report.dump();
  bool found = false;
  for (const auto& f : report["accounts_with_differences"][0]["findings"]) found |= f["class"] == "lot_mismatch";
  EXPECT_TRUE(found) << report.dump();
  EXPECT_EQ(query_rows(db_, "SELECT status FROM account WHERE account_id = 'alice'")[0][0], "frozen");
  exec_sql(db_, "UPDATE lot SET remaining = remaining + 1 WHERE account_id = 'alice'");
  EXPECT_EQ(client_->call("POST", "/v1/accounts/t1/alice/unfreeze").json()["status"], "active");
}

// An operator's freeze and unfreeze write their events with the contract's
// document (next expiry included) and no cause; a change to the status the
// account has, or of a closed account, writes nothing.
TEST_F(LotsTest, AStatusChangesEventCarriesTheAccountDocument) {
  const auto at = alice_with_a_lot_expiring(30, 20);
  auto events = [&] {
    return query_rows(db_,
                      "SELECT aggregate_version, event_type, payload FROM outbox_event "
                      "WHERE account_id = 'alice' AND event_type IN ('account.frozen', 'account.active') "
                      "ORDER BY aggregate_version");
  };
  auto set_status = [&](const std::string& action) {
    auto r = client_->call("POST", "/v1/accounts/t1/alice/" + action);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  };
  EXPECT_EQ(set_status("freeze")["version"], 4);
  EXPECT_EQ(set_status("freeze")["version"], 4) << "already frozen";
  EXPECT_EQ(set_status("unfreeze")["version"], 5);
  const auto written = events();
  ASSERT_EQ(written.size(), 2u);
  contract::account_document alice{"t1", "alice", 50, 0, "frozen", 4, at, 30};
  EXPECT_EQ(written[0][0], "4");
  EXPECT_EQ(written[0][1], "account.frozen");
  EXPECT_EQ(json::parse(written[0][2]), contract::event_payload(alice));
  alice.status = "active";
  alice.version = 5;
  EXPECT_EQ(written[1][0], "5");
  EXPECT_EQ(written[1][1], "account.active");
  EXPECT_EQ(json::parse(written[1][2]), contract::event_payload(alice));

  exec_sql(db_, "UPDATE account SET status = 'closed' WHERE account_id = 'alice'");
  const auto closed = set_status("freeze");
  EXPECT_EQ(closed["status"], "closed");
  EXPECT_EQ(closed["version"], 5);
  EXPECT_EQ(events().size(), 2u);
}

// Reconciliation joins each lot with its operations, open holds and expire
// entries in memory, by tenant, account and lot id (store/queries.cpp).
// Clean over two accounts with the same lot ids, an expired lot and an
// open hold across two lots; then a unit of held value moved from one lot
// to another (the account's sums unchanged) is found on exactly those two.
TEST_F(LotsTest, ReconciliationMatchesEachLotWithItsOwnOperationsHoldsAndExpiries) {
  const auto at = alice_with_a_lot_expiring(10, 20);
  open("bob");
  credit("alice", "c3", 5, std::nullopt, "r3");  // another rule version: a lot of its own
  credit("bob", "b1", 7, std::nullopt);
  set_clock(at - 2000);
  EXPECT_EQ(send(command("debit", "alice", "d1", 3))["status"], "succeeded");
  EXPECT_EQ(send(command("debit", "bob", "d2", 2))["status"], "succeeded");
  set_clock(at);
  ASSERT_TRUE(eventually([&] { return lot("alice", 1)["state"] == "expired"; })) << lot("alice", 1).dump();
  auto hold = send(command("hold", "alice", "h1", 22));
  ASSERT_EQ(hold["status"], "succeeded") << hold.dump();
  ASSERT_EQ(hold["lots"].size(), 2u) << hold.dump();
  expect_reconciled();

  const auto move_held = [&](int by) {
    exec_sql(db_, "UPDATE lot SET held = held + (CASE lot_id WHEN 2 THEN -1 ELSE 1 END) * " + std::to_string(by) +
                      " WHERE account_id = 'alice' AND lot_id IN (2, 3)");
  };
  move_held(1);
  auto report = client_->call("GET", "/v1/reconciliation?freeze=false").json();
  ASSERT_EQ(report["differences"], 1) << report.dump();
  const auto& alice = report["accounts_with_differences"][0];
  EXPECT_EQ(alice["account_id"], "alice");
  const json lot_finding = {{"class", "lot_mismatch"}, {"biz_type", "lot"}};
  json expected = json::array();
  for (const auto& [id, amount] : {std::pair{"2", -1}, {"3", 1}}) {
    auto f = lot_finding;
    f["biz_id"] = id;
    f["amount"] = amount;
    expected.push_back(f);
  }
  EXPECT_EQ(alice["findings"], expected) << report.dump();
  move_held(-1);
  expect_reconciled();
}

TEST_F(LotsTest, TheClockMovesOnlyWhenEnabled) {
  restart();
  EXPECT_EQ(client_->call("POST", "/v1/admin/clock", R"({"offset_ms": 1000})").status, 404);
}

}  // namespace
}  // namespace tally::test
