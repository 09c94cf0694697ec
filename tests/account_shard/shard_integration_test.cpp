// account_shard against a real PostgreSQL and a real shard process.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "account_shard/store/batch.hpp"
#include "tests/account_shard/shard_fixture.hpp"

namespace tally::test {
namespace {

using nlohmann::json;

TEST_F(ShardTest, TwoConcurrentDebitsOf80FromHundredOneSucceeds) {
  open("alice", 100);
  const auto replies =
      send_at_once(2, [](std::size_t i) { return command("debit", "alice", "d" + std::to_string(i), 80); });
  std::multiset<std::string> outcomes{replies[0]["status"], replies[1]["status"]};
  EXPECT_EQ(outcomes, (std::multiset<std::string>{"rejected", "succeeded"}));
  for (const auto& r : replies)
    if (r["status"] == "rejected") {
      EXPECT_EQ(r["code"], "insufficient_funds");
    }
  EXPECT_EQ(balance("alice"), 20);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM ledger_entry WHERE biz_type = 'debit'"), 1);
}

TEST_F(ShardTest, SameKeyTenTimesGivesOneEntryAndIdenticalReplies) {
  open("alice", 100);
  auto replies = send_at_once(5, [](std::size_t) { return command("debit", "alice", "k1", 80); });
  for (int i = 5; i < 10; ++i) replies.push_back(send(command("debit", "alice", "k1", 80)));
  int fresh = 0;
  for (auto& r : replies) {
    if (!r["replayed"].get<bool>()) ++fresh;
    r.erase("replayed");
    EXPECT_EQ(r, replies[0]);
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(replies[0]["status"], "succeeded");
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM ledger_entry WHERE biz_id = 'k1'"), 1);

  auto before = std::make_tuple(count("operation"), count("ledger_entry"), count("outbox_event"), balance("alice"));
  auto conflict = send(command("debit", "alice", "k1", 81));
  EXPECT_EQ(conflict["status"], "conflict");
  EXPECT_EQ(conflict["code"], "idempotency_conflict");
  EXPECT_EQ(before,
            std::make_tuple(count("operation"), count("ledger_entry"), count("outbox_event"), balance("alice")));
}

TEST_F(ShardTest, StoredRejectionIsReplayed) {
  open("alice", 10);
  auto first = send(command("debit", "alice", "big", 50));
  EXPECT_EQ(first["status"], "rejected");
  send(command("credit", "alice", "more", 100));
  auto again = send(command("debit", "alice", "big", 50));
  EXPECT_EQ(again["status"], "rejected");
  EXPECT_EQ(again["code"], "insufficient_funds");
  EXPECT_TRUE(again["replayed"].get<bool>());
  EXPECT_EQ(balance("alice"), 110);
}

// GET /v1/operations/...: what the store kept of one operation, answered
// from the operation row, not recomputed.
TEST_F(ShardTest, OperationLookupAnswersTheStoredOutcome) {
  open("alice", 10);
  auto debit = send(command("debit", "alice", "big", 50));
  ASSERT_EQ(debit["status"], "rejected");
  auto credit = send(command("credit", "alice", "more", 100));
  ASSERT_EQ(credit["status"], "succeeded");

  auto got = client_->call("GET", "/v1/operations/t1/alice/credit/more");
  ASSERT_EQ(got.status, 200) << got.body;
  auto op = got.json();
  EXPECT_EQ(op["state"], "succeeded");
  EXPECT_EQ(op["amount"], 100);
  EXPECT_EQ(op["balance_after"], 110);
  EXPECT_EQ(op["balance_after"], credit["balance_after"]);
  EXPECT_EQ(op["version"], credit["version"]);
  EXPECT_EQ(op["ledger_seq"], credit["ledger_seq"]);
  EXPECT_TRUE(op["code"].is_null());
  EXPECT_EQ(op["request_hash"].get<std::string>().size(), 64u);

  auto rejected = client_->call("GET", "/v1/operations/t1/alice/debit/big").json();
  EXPECT_EQ(rejected["state"], "rejected");
  EXPECT_EQ(rejected["code"], "insufficient_funds");
  EXPECT_TRUE(rejected["ledger_seq"].is_null());

  EXPECT_EQ(client_->call("GET", "/v1/operations/t1/alice/credit/never").status, 404);
  EXPECT_EQ(client_->call("GET", "/v1/operations/t1/alice/debit/more").status, 404);
}

TEST_F(ShardTest, CrashAfterCommitBeforeReplyThenResendGivesStoredOutcome) {
  open("alice", 100);
  auto armed = client_->call("POST", "/v1/admin/failpoints", R"({"spec":"after_commit_before_reply=crash"})");
  ASSERT_EQ(armed.status, 200) << armed.body;
  auto lost = client_->call("POST", "/v1/commands", command("debit", "alice", "d1", 30).dump());
  EXPECT_EQ(lost.status, 0) << "the reply must be lost: " << lost.body;
  EXPECT_EQ(shard_->wait_exit(), 137);
  restart();
  auto r = send(command("debit", "alice", "d1", 30));
  EXPECT_EQ(r["status"], "succeeded");
  EXPECT_TRUE(r["replayed"].get<bool>()) << "the effect committed before the crash";
  EXPECT_EQ(balance("alice"), 70);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM ledger_entry WHERE biz_id = 'd1'"), 1);
}

TEST_F(ShardTest, HoldsCaptureReleaseAndTombstones) {
  open("alice", 100);
  EXPECT_EQ(send(command("hold", "alice", "h1", 30))["status"], "succeeded");
  EXPECT_EQ(query_int(db_, "SELECT held FROM account WHERE account_id = 'alice'"), 30);
  auto cap = send(command("capture", "alice", "h1"));
  EXPECT_EQ(cap["status"], "succeeded");
  EXPECT_EQ(cap["amount"], 30);
  EXPECT_EQ(send(command("capture", "alice", "h1"))["replayed"], true) << "double capture is idempotent";
  EXPECT_EQ(balance("alice"), 70);

  EXPECT_EQ(send(command("hold", "alice", "h2", 40))["status"], "succeeded");
  auto partial = send(command("capture", "alice", "h2", 15));
  EXPECT_EQ(partial["status"], "succeeded");
  EXPECT_EQ(partial["held_after"], 0) << "a partial capture releases the rest";
  EXPECT_EQ(balance("alice"), 55);

  EXPECT_EQ(send(command("hold", "alice", "h3", 20))["status"], "succeeded");
  EXPECT_EQ(send(command("release", "alice", "h3"))["status"], "succeeded");
  auto late_capture = send(command("capture", "alice", "h3"));
  EXPECT_EQ(late_capture["status"], "rejected");
  EXPECT_EQ(late_capture["code"], "hold_released");

  EXPECT_EQ(send(command("release", "alice", "h4"))["status"], "succeeded") << "release before hold";
  auto late_hold = send(command("hold", "alice", "h4", 10));
  EXPECT_EQ(late_hold["status"], "rejected");
  EXPECT_EQ(late_hold["code"], "hold_released");
  EXPECT_EQ(query_int(db_, "SELECT held FROM account WHERE account_id = 'alice'"), 0);
  EXPECT_EQ(balance("alice"), 55);
}

TEST_F(ShardTest, CancelKeyBarrier) {
  open("bob");
  auto c = send(command("cancel_key", "bob", "", 0, {{"target_type", "credit"}, {"target_id", "x1"}}));
  EXPECT_EQ(c["status"], "cancelled");
  EXPECT_EQ(send(command("credit", "bob", "x1", 10))["status"], "cancelled");
  EXPECT_EQ(balance("bob"), 0);
  EXPECT_EQ(send(command("credit", "bob", "x2", 10))["status"], "succeeded");
  auto late = send(command("cancel_key", "bob", "", 0, {{"target_type", "credit"}, {"target_id", "x2"}}));
  EXPECT_EQ(late["status"], "already_applied");
  EXPECT_EQ(balance("bob"), 10);
}

TEST_F(ShardTest, ConcurrentRefundsNeverExceedTheOriginal) {
  open("alice", 100);
  EXPECT_EQ(send(command("debit", "alice", "buy", 100))["status"], "succeeded");
  auto replies = send_at_once(10, [](std::size_t i) {
    return command("refund", "alice", "r" + std::to_string(i), 15,
                   {{"original_type", "debit"}, {"original_id", "buy"}});
  });
  int ok = 0, rejected = 0;
  for (auto& r : replies) {
    if (r["status"] == "succeeded") ++ok;
    if (r["status"] == "rejected" && r["code"] == "refund_exceeds_original") ++rejected;
  }
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(rejected, 4);
  EXPECT_EQ(balance("alice"), 90);
  EXPECT_EQ(query_int(db_, "SELECT refunded FROM operation WHERE biz_id = 'buy'"), 90);
}

TEST_F(ShardTest, BadInputIsRefusedAndChangesNothing) {
  open("alice", 100);
  auto snapshot = [&] {
    return std::make_tuple(count("account"), count("operation"), count("ledger_entry"), count("outbox_event"),
                           count("hold"), balance("alice"));
  };
  auto before = snapshot();
  std::vector<std::string> bodies = {
      "{not json",
      R"({"type":"debit","tenant":"t1","account_id":"alice","biz_id":"b1"})",
      R"({"type":"debit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":"10"})",
      R"({"type":"debit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":0})",
      R"({"type":"debit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":-5})",
      R"({"type":"debit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":1000000000000001})",
      R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":9223372036854775808})",
      R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":99999999999999999999999})",
      R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":1.5})",
      R"({"type":"explode","tenant":"t1","account_id":"alice","biz_id":"b1","amount":1})",
      R"({"type":"credit","tenant":"t1","account_id":"al ice","biz_id":"b1","amount":1})",
      R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"","amount":1})",
      R"({"type":"credit","tenant":"t1","account_id":"alice","biz_id":"b1","amount":1,"extra":true})",
      R"([1,2,3])",
  };
  for (const auto& b : bodies) {
    auto r = client_->call("POST", "/v1/commands", b);
    EXPECT_EQ(r.status, 400) << b;
    auto j = r.json();
    EXPECT_EQ(j["error"]["code"], "invalid_request") << b;
    EXPECT_TRUE(j["error"]["message"].is_string()) << b;
    EXPECT_TRUE(j["error"]["request_id"].is_string()) << b;
  }
  // A batch with one bad command is refused whole.
  json batch = {{"commands", {command("credit", "alice", "ok1", 5), {{"type", "credit"}}}}};
  EXPECT_EQ(client_->call("POST", "/v1/batch", batch.dump()).status, 400);
  EXPECT_EQ(client_->call("POST", "/v1/commands", std::string(2 * 1024 * 1024, ' ')).status, 413);
  EXPECT_EQ(client_->call("GET", "/v1/accounts/t1/bad%20id").status, 400);
  EXPECT_EQ(client_->call("POST", "/v1/commands", command("credit", "alice", "c", 1).dump(), "wrong-token").status,
            401);
  EXPECT_EQ(client_->call("POST", "/v1/nothing", "{}").status, 404);
  EXPECT_EQ(before, snapshot());
}

// The writers plan each batch statement once per connection, so its one
// (generic) plan must probe by key whatever the tables hold. Here they are
// freshly migrated and empty, the state in which a join against a batch's
// keys gets planned as a scan.
TEST_F(ShardTest, BatchStatementsPlanAsProbesOnEmptyTables) {
  const std::regex param(R"(\$(\d+))");
  int index = 0;
  for (auto sql : shard::batch_statements()) {
    int params = 0;
    std::string text(sql);
    for (std::sregex_iterator m(text.begin(), text.end(), param), end; m != end; ++m)
      params = std::max(params, std::stoi((*m)[1]));
    std::string args;
    for (int i = 0; i < params; ++i) args += i ? ", NULL" : "NULL";
    auto name = "p" + std::to_string(++index);
    std::string plan;
    for (const auto& row : query_rows(db_, std::string(shard::shard_writer_session_sql) + "; PREPARE " + name + " AS " +
                                               text + "; EXPLAIN EXECUTE " + name + "(" + args + ")"))
      plan += row.at(0) + "\n";
    ASSERT_FALSE(plan.empty()) << text;
    for (const char* scan : {"Seq Scan", "Hash", "Merge Join", "Materialize", "Bitmap"})
      EXPECT_EQ(plan.find(scan), std::string::npos) << scan << " in the plan of " << text << "\n" << plan;
    auto count = [&](const std::string& what) {
      std::size_t n = 0;
      for (auto at = plan.find(what); at != std::string::npos; at = plan.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("Index Scan"), count("Index Cond:")) << "an index read whole in the plan of " << text << "\n"
                                                         << plan;
  }
}

TEST_F(ShardTest, BatchEndpointAnswersEachCommand) {
  open("alice", 50);
  json batch = {{"commands",
                 {command("debit", "alice", "b1", 30), command("debit", "alice", "b2", 30),
                  command("credit", "nobody", "b3", 5), command("debit", "alice", "b1", 30)}}};
  auto r = client_->call("POST", "/v1/batch", batch.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  auto results = r.json()["results"];
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0]["status"], "succeeded");
  EXPECT_EQ(results[1]["code"], "insufficient_funds");
  EXPECT_EQ(results[2]["code"], "account_not_found");
  EXPECT_EQ(results[3]["replayed"], true);
  EXPECT_EQ(balance("alice"), 20);
}

TEST_F(ShardTest, ReconciliationCleanThenCorruptedAccountIsClassifiedAndFrozen) {
  open("alice", 100);
  open("bob", 40);
  send(command("debit", "alice", "d1", 25));
  auto clean = client_->call("GET", "/v1/reconciliation");
  ASSERT_EQ(clean.status, 200) << clean.body;
  EXPECT_EQ(clean.json()["differences"], 0);

  // A change by hand writes no entry: a full run reads every account.
  exec_sql(db_, "UPDATE account SET balance = balance + 7 WHERE account_id = 'bob'");
  auto report = client_->call("GET", "/v1/reconciliation?mode=full").json();
  ASSERT_EQ(report["differences"], 1) << report.dump();
  auto acc = report["accounts_with_differences"][0];
  EXPECT_EQ(acc["account_id"], "bob");
  EXPECT_EQ(acc["difference"], -7);
  EXPECT_EQ(acc["findings"][0]["class"], "unexplained");
  EXPECT_EQ(query_rows(db_, "SELECT status FROM account WHERE account_id = 'bob'")[0][0], "frozen");
  auto refused = send(command("debit", "bob", "d2", 1));
  EXPECT_EQ(refused["status"], "retry");
  EXPECT_EQ(refused["code"], "account_frozen");
  EXPECT_EQ(send(command("debit", "alice", "d3", 1))["status"], "succeeded") << "other accounts keep working";
  // Repair by a reversing entry is the operator's job; restore for the checker.
  exec_sql(db_, "UPDATE account SET balance = balance - 7 WHERE account_id = 'bob'");
  EXPECT_EQ(client_->call("POST", "/v1/accounts/t1/bob/unfreeze").json()["status"], "active");
}

// No index keeps an account's outbox versions distinct (each is the
// account's new version, written under its row lock): the promise checker
// must find a repeated one even when the count and the highest still match.
TEST_F(ShardTest, PromiseCheckerFindsAnOutboxVersionTwice) {
  open("alice", 100);
  send(command("debit", "alice", "d1", 5));
  ASSERT_EQ(query_int(db_, "SELECT version FROM account WHERE account_id = 'alice'"), 3);
  auto second = query_rows(db_, "SELECT id FROM outbox_event WHERE account_id = 'alice' AND aggregate_version = 2");
  ASSERT_EQ(second.size(), 1u);
  exec_sql(db_, "UPDATE outbox_event SET aggregate_version = 1 WHERE id = " + second[0][0]);
  auto violations = check_shard_promises(db_);
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].rfind("outbox events != account versions: t1 alice 3 3 2 3", 0), 0u) << violations[0];
  exec_sql(db_, "UPDATE outbox_event SET aggregate_version = 2 WHERE id = " + second[0][0]);
}

// A random workload from many clients, then every promise checked and every
// client-observed outcome matched with the stored one.
TEST_F(ShardTest, RandomConcurrentWorkloadKeepsEveryPromise) {
  constexpr int accounts = 50, clients = 8, per_client = 1250;
  for (int i = 0; i < accounts; ++i) open("a" + std::to_string(i), 1000);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::map<std::string, json> acknowledged;  // biz_id → reply
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      http_client c(port_);
      for (int i = 0; i < per_client; ++i) {
        // A third of the traffic hits one hot account.
        std::string account = rng() % 3 == 0 ? "a0" : "a" + std::to_string(rng() % accounts);
        std::string id = "w" + std::to_string(t) + "-" + std::to_string(i);
        std::int64_t amount = 1 + rng() % 60;
        json cmd;
        switch (rng() % 6) {
          case 0: cmd = command("credit", account, id, amount); break;
          case 1:
          case 2: cmd = command("debit", account, id, amount); break;
          case 3: cmd = command("hold", account, id, amount); break;
          case 4:
            cmd = command("capture", account, "w" + std::to_string(t) + "-" + std::to_string(i > 0 ? i - 1 : 0));
            break;
          default:
            cmd = command("release", account, "w" + std::to_string(t) + "-" + std::to_string(i > 1 ? i - 2 : 0));
            break;
        }
        auto r = send_command(c, cmd.dump());
        if (r.status != 200) {
          ++failures;
          continue;
        }
        auto j = r.json();
        if (j["status"] == "succeeded" && !j["replayed"].get<bool>()) {
          std::lock_guard lock(mu);
          acknowledged[cmd["type"].get<std::string>() + "/" + account + "/" + cmd["biz_id"].get<std::string>()] = j;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto rows = query_rows(
      db_, "SELECT biz_type || '/' || account_id || '/' || biz_id, amount FROM operation WHERE state = 'succeeded'");
  std::map<std::string, std::int64_t> stored;
  for (const auto& r : rows) stored[r[0]] = std::stoll(r[1]);
  for (const auto& [key, reply] : acknowledged) {
    auto it = stored.find(key);
    ASSERT_NE(it, stored.end()) << "acknowledged but not stored: " << key;
    EXPECT_EQ(it->second, reply["amount"].get<std::int64_t>()) << key;
  }
  EXPECT_GE(acknowledged.size(), 1000u);
  auto v = check_shard_promises(db_);
  EXPECT_TRUE(v.empty()) << v.front();
}

}  // namespace
}  // namespace tally::test
