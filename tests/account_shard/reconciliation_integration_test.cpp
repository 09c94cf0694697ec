// Incremental reconciliation on a real shard and PostgreSQL: each run
// checks the accounts written since the last run, from each account's
// checkpoint; an account that differed is checked again until it agrees; a
// full run reads every account.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tally::test
