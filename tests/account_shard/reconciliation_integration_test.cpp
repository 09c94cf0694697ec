// Incremental reconciliation on a real shard and PostgreSQL: each run
// checks the accounts written since the last run, from each account's
// checkpoint; an account that differed is checked again until it agrees; a
// full run reads every account.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/account_shard/shard_fixture.hpp"

namespace tally::test {
namespace {

class ReconciliationTest : public ShardTest {
 protected:
  json run(const std::string& query = "") {
    auto r = client_->call("GET", "/v1/reconciliation?freeze=false" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }
  static std::vector<std::string> differing(const json& report) {
    std::vector<std::string> out;
    for (const auto& a : report["accounts_with_differences"]) out.push_back(a["account_id"]);
    return out;
  }
  // account_id|seq|balance|clean per checkpoint, by account.
  std::vector<std::vector<std::string>> checkpoints() {
    return query_rows(db_, "SELECT account_id, seq, balance, clean FROM account_checkpoint ORDER BY account_id");
  }
  json audit(std::int64_t id) { return client_->call("GET", "/v1/audits/" + std::to_string(id)).json(); }
  // Starts an audit (202) and returns its id.
  std::int64_t start_audit(const std::string& query = "?freeze=false") {
    auto r = client_->call("POST", "/v1/audits" + query);
    EXPECT_EQ(r.status, 202) << r.body;
    EXPECT_EQ(r.json()["state"], "running") << r.body;
    return r.json()["audit_id"].get<std::int64_t>();
  }
  bool ended(std::int64_t id, std::chrono::seconds deadline = std::chrono::seconds(30)) {
    return eventually([&] { return audit(id)["state"] != "running"; }, deadline);
  }
  // Changes the balances of `accounts` by hand (no entry): only a full
  // check finds it; by -by, restored for the promise checker.
  void tamper(const std::vector<std::string>& accounts, int by) {
    for (const auto& a : accounts)
      exec_sql(db_, "UPDATE account SET balance = balance + " + std::to_string(by) + " WHERE account_id = '" + a + "'");
  }
  std::string last_entry(const std::string& account) {
    return std::to_string(query_int(db_, "SELECT max(seq) FROM ledger_entry WHERE account_id = '" + account + "'"));
  }
};

TEST_F(ReconciliationTest, EachRunChecksWhatWasWrittenSinceFromEachCheckpoint) {
  open("alice", 100);
  open("bob", 40);
  open("carol", 10);
  // Planted before the first run: bob's balance changed by hand.
  exec_sql(db_, "UPDATE account SET balance = balance + 7 WHERE account_id = 'bob'");
  auto first = run();
  EXPECT_EQ(first["mode"], "incremental");
  EXPECT_EQ(first["since"], 0) << "no run before: every account was written since";
  EXPECT_EQ(first["accounts"], 3);
  EXPECT_EQ(differing(first), std::vector<std::string>{"bob"}) << first.dump();
  using row = std::vector<std::string>;
  EXPECT_EQ(checkpoints(), (std::vector<row>{{"alice", last_entry("alice"), "100", "t"},
                                             {"bob", "0", "0", "f"},
                                             {"carol", last_entry("carol"), "10", "t"}}));

  // Nothing written since: only bob, which differed, is checked again.
  auto second = run();
  EXPECT_EQ(second["since"], first["watermark"]);
  EXPECT_EQ(second["accounts"], 1);
  EXPECT_EQ(differing(second), std::vector<std::string>{"bob"}) << second.dump();

  // Written since: alice and carol; planted after carol's checkpoint: her
  // balance changed by hand after a credit.
  EXPECT_EQ(send(command("debit", "alice", "d1", 5))["status"], "succeeded");
  EXPECT_EQ(send(command("credit", "carol", "c1", 3))["status"], "succeeded");
  exec_sql(db_, "UPDATE account SET balance = balance - 2 WHERE account_id = 'carol'");
  auto third = run();
  EXPECT_EQ(third["accounts"], 3);
  EXPECT_EQ(differing(third), (std::vector<std::string>{"bob", "carol"})) << third.dump();
  const auto& carol = third["accounts_with_differences"][1];
  EXPECT_EQ(carol["rebuilt"], 13);
  EXPECT_EQ(carol["snapshot"], 11);
  EXPECT_EQ(carol["findings"][0]["class"], "unexplained");
  EXPECT_EQ(checkpoints()[0], (row{"alice", last_entry("alice"), "95", "t"})) << "alice's moved to her debit";
  EXPECT_EQ(checkpoints()[2][3], "f") << "carol keeps her last clean checkpoint, marked to be checked again";
  EXPECT_EQ(checkpoints()[2][2], "10");

  // Repaired by hand: both are checked once more and agree; then nothing
  // is left to check.
  exec_sql(db_, "UPDATE account SET balance = balance - 7 WHERE account_id = 'bob'");
  exec_sql(db_, "UPDATE account SET balance = balance + 2 WHERE account_id = 'carol'");
  auto repaired = run();
  EXPECT_EQ(repaired["accounts"], 2);
  EXPECT_EQ(repaired["differences"], 0) << repaired.dump();
  auto idle = run();
  EXPECT_EQ(idle["accounts"], 0);
  EXPECT_EQ(checkpoints(), (std::vector<row>{{"alice", last_entry("alice"), "95", "t"},
                                             {"bob", last_entry("bob"), "40", "t"},
                                             {"carol", last_entry("carol"), "13", "t"}}));
  auto full = run("&mode=full");
  EXPECT_EQ(full["mode"], "full");
  EXPECT_EQ(full["accounts"], 3);
  EXPECT_EQ(full["differences"], 0);

  auto runs = client_->call("GET", "/v1/reconciliation/runs?limit=2").json()["reports"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["mode"], "full");
  EXPECT_TRUE(runs[0]["since"].is_null());
  EXPECT_EQ(runs[1]["mode"], "incremental");
  EXPECT_EQ(runs[1]["since"], repaired["watermark"]);
}

TEST_F(ReconciliationTest, BadRunsAreRefusedAndChangeNothing) {
  open("alice", 100);
  run();
  EXPECT_EQ(send(command("debit", "alice", "d1", 5))["status"], "succeeded");
  const auto runs = count("reconciliation_run");
  const auto before = checkpoints();
  for (const auto* query : {"?mode=partial", "?watermark=1", "?watermark=-1", "?freeze=maybe"}) {
    auto r = client_->call("GET", std::string("/v1/reconciliation") + query);
    EXPECT_EQ(r.status, 400) << query << " " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "invalid_request") << r.body;
  }
  EXPECT_EQ(count("reconciliation_run"), runs);
  EXPECT_EQ(checkpoints(), before);
  // A full run may look back at any watermark; no checkpoint moves back.
  auto back = run("&mode=full&watermark=1");
  EXPECT_EQ(back["watermark"], 1);
  EXPECT_EQ(back["differences"], 0) << back.dump();
  EXPECT_EQ(checkpoints(), before);
}

TEST_F(ReconciliationTest, AFullAuditPagesEveryAccountAndFindsWhatDiffers) {
  restart({"--audit.page_accounts=2", "--audit.pause_ms=0"});
  std::vector<std::string> accounts;
  for (int i = 0; i < 7; ++i) {
    accounts.push_back("a" + std::to_string(i));
    open(accounts.back(), 10 + i);
  }
  tamper({"a3", "a6"}, 5);
  const auto id = start_audit();
  ASSERT_TRUE(ended(id)) << audit(id).dump();
  const auto done = audit(id);
  EXPECT_EQ(done["state"], "completed");
  EXPECT_EQ(done["accounts_total"], 7);
  EXPECT_EQ(done["accounts_checked"], 7) << "four pages of two, each account once";
  EXPECT_EQ(done["progress"], 1.0);
  EXPECT_EQ(done["differences"], 2) << done.dump();
  ASSERT_EQ(done["accounts_with_differences"].size(), 2u);
  EXPECT_EQ(done["accounts_with_differences"][0]["account_id"], "a3");
  EXPECT_EQ(done["accounts_with_differences"][1]["account_id"], "a6");
  EXPECT_EQ(done["classes"]["unexplained"], 2) << done.dump();
  EXPECT_TRUE(done["frozen"].empty()) << "freeze=false";
  EXPECT_FALSE(done["finished_at"].is_null());
  // What it leaves: a clean checkpoint per account that agrees; those that
  // differ are checked again by the next incremental run.
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM account_checkpoint WHERE clean"), 5);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM account_checkpoint WHERE NOT clean"), 2);
  auto next = run();
  EXPECT_EQ(differing(next), (std::vector<std::string>{"a3", "a6"})) << next.dump();
  EXPECT_EQ(client_->call("GET", "/v1/audits?limit=1").json()["audits"][0]["audit_id"], id);
  tamper({"a3", "a6"}, -5);

  // With freeze (the default) the accounts that differ are frozen.
  tamper({"a1"}, 1);
  const auto freezing = start_audit("");
  ASSERT_TRUE(ended(freezing));
  EXPECT_EQ(audit(freezing)["frozen"], json::array({"a1"}));
  EXPECT_EQ(query_rows(db_, "SELECT status FROM account WHERE account_id = 'a1'")[0][0], "frozen");
  tamper({"a1"}, -1);
  EXPECT_EQ(client_->call("POST", "/v1/accounts/t1/a1/unfreeze").json()["status"], "active");
}

TEST_F(ReconciliationTest, AnAuditInterruptedByACrashResumesAfterItsLastPage) {
  const std::vector<std::string> slow{"--audit.page_accounts=1", "--audit.pause_ms=200"};
  restart(slow);
  for (int i = 0; i < 6; ++i) open("a" + std::to_string(i), 10);
  tamper({"a4"}, 3);
  const auto id = start_audit();
  ASSERT_TRUE(eventually([&] { return audit(id)["accounts_checked"] >= 2; })) << audit(id).dump();
  shard_->kill9();
  shard_->wait_exit();
  restart({"--audit.page_accounts=1", "--audit.pause_ms=0"});
  ASSERT_TRUE(ended(id)) << audit(id).dump();
  const auto done = audit(id);
  EXPECT_EQ(done["state"], "completed");
  EXPECT_EQ(done["accounts_checked"], 6) << "no account twice, none left out: " << done.dump();
  EXPECT_EQ(done["differences"], 1);
  EXPECT_EQ(done["accounts_with_differences"][0]["account_id"], "a4");
  tamper({"a4"}, -3);
}

TEST_F(ReconciliationTest, ACancelledAuditStopsBetweenPages) {
  restart({"--audit.page_accounts=1", "--audit.pause_ms=200"});
  for (int i = 0; i < 6; ++i) open("a" + std::to_string(i), 10);
  const auto id = start_audit();
  ASSERT_TRUE(eventually([&] { return audit(id)["accounts_checked"] >= 1; })) << audit(id).dump();
  auto cancelled = client_->call("POST", "/v1/audits/" + std::to_string(id) + "/cancel");
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json()["state"], "cancelled");
  const auto checked = cancelled.json()["accounts_checked"].get<int>();
  // The job pages running audits in turn: once a later audit has ended, the
  // cancelled one had every chance to go on (a page under way still counts).
  const auto later = start_audit();
  ASSERT_TRUE(ended(later));
  const auto after = audit(id);
  EXPECT_EQ(after["state"], "cancelled");
  EXPECT_LE(after["accounts_checked"].get<int>(), checked + 1) << after.dump();
  EXPECT_LT(after["accounts_checked"].get<int>(), 6);
  // Cancelling again changes nothing.
  EXPECT_EQ(client_->call("POST", "/v1/audits/" + std::to_string(id) + "/cancel").json()["state"], "cancelled");
  EXPECT_EQ(client_->call("POST", "/v1/audits/" + std::to_string(later) + "/cancel").json()["state"], "completed");
}

TEST_F(ReconciliationTest, BadAuditRequestsAreRefusedAndChangeNothing) {
  open("alice", 10);
  const auto id = start_audit("?freeze=false&tenant=t1");
  const auto audits = count("audit_run");
  EXPECT_EQ(client_->call("POST", "/v1/audits?freeze=maybe").status, 400);
  EXPECT_EQ(client_->call("POST", "/v1/audits?tenant=bad%20id").status, 400);
  EXPECT_EQ(client_->call("GET", "/v1/audits?limit=0").status, 400);
  EXPECT_EQ(client_->call("GET", "/v1/audits/abc").status, 404);
  EXPECT_EQ(client_->call("GET", "/v1/audits/999999").status, 404);
  EXPECT_EQ(client_->call("POST", "/v1/audits/999999/cancel").status, 404);
  // Another tenant's audit is not found, nor cancelled.
  EXPECT_EQ(client_->call("GET", "/v1/audits/" + std::to_string(id) + "?tenant=t2").status, 404);
  EXPECT_EQ(client_->call("POST", "/v1/audits/" + std::to_string(id) + "/cancel?tenant=t2").status, 404);
  EXPECT_EQ(count("audit_run"), audits);
  ASSERT_TRUE(ended(id));
  EXPECT_EQ(audit(id)["state"], "completed");
}

}  // namespace
}  // namespace tally::test
