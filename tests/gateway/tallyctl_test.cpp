// tallyctl, the binary, against the whole system: every command group,
// human and --json output, and its exit status — 0 success, 1 an API error
// (its code on stderr) or an unreachable gateway, 2 a usage error.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/pg_fixture.hpp"
#include "tests/support/stack.hpp"

namespace tally::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct run_result {
  int exit = -1;
  std::string out, err;
};

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Tallyctl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { system_ = new stack(); }
  static void TearDownTestSuite() {
    delete system_;
    system_ = nullptr;
  }

  // Runs tallyctl with TALLY_URL and TALLY_API_KEY set as given; its output
  // goes to <base>.out and <base>.err until it ends.
  static run_result tallyctl(const std::vector<std::string>& args, const std::string& key = acme_operator_key,
                             const std::string& url = "",
                             const std::filesystem::path& base = std::filesystem::temp_directory_path() /
                                                                 unique_id("tallyctl")) {
    std::string cmd = "TALLY_URL=" + quoted(url.empty() ? gateway_url() : url) + " TALLY_API_KEY=" + quoted(key) + " " +
                      quoted(bin_dir() + "/gateway/tallyctl");
    for (const auto& a : args) cmd += " " + quoted(a);
    cmd += " >" + base.string() + ".out 2>" + base.string() + ".err";
    const int status = std::system(cmd.c_str());
    run_result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base.string() + ".out"),
                 slurp(base.string() + ".err")};
    std::filesystem::remove(base.string() + ".out");
    std::filesystem::remove(base.string() + ".err");
    return r;
  }
  static std::string gateway_url() { return "http://127.0.0.1:" + std::to_string(system_->gateway_port()); }

  http_reply post(const std::string& target, const json& body) {
    return client_.call("POST", target, body.dump(), acme_app_key);
  }
  std::string open_funded(std::int64_t amount) {
    const auto id = unique_id("acct");
    EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 201);
    if (amount > 0) {
      EXPECT_EQ(
          tallyctl({"credit", "--account", id, "--amount", std::to_string(amount), "--biz-id", unique_id("c")}).exit,
          0);
    }
    return id;
  }

  static stack* system_;
  http_client client_{system_->gateway_port()};
};
stack* Tallyctl::system_ = nullptr;

TEST_F(Tallyctl, WritesAndReadsAsTablesOrJson) {
  const auto id = open_funded(100);
  const auto biz = unique_id("c");
  auto credit = tallyctl({"credit", "--account", id, "--amount", "25", "--biz-id", biz, "--memo", "gift"});
  EXPECT_EQ(credit.exit, 0) << credit.err;
  EXPECT_THAT(credit.out, HasSubstr("credit saga sg_"));
  EXPECT_THAT(credit.out, HasSubstr("state:    completed"));
  auto again = tallyctl({"--json", "credit", "--account", id, "--amount", "25", "--biz-id", biz, "--memo", "gift"});
  ASSERT_EQ(again.exit, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["state"], "completed");
  EXPECT_NE(credit.out.find(json::parse(again.out)["saga_id"].get<std::string>()), std::string::npos);

  auto shown = tallyctl({"--json", "accounts", "show", id, "--strong"}, acme_app_key);
  ASSERT_EQ(shown.exit, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["balance"], 125);
  EXPECT_THAT(tallyctl({"accounts", "show", id, "--strong"}, acme_app_key).out, HasSubstr("balance      125"));
  auto entries = tallyctl({"accounts", "entries", id, "--limit", "1"}, acme_app_key);
  EXPECT_EQ(entries.exit, 0) << entries.err;
  EXPECT_THAT(entries.out, HasSubstr("open_account"));
  EXPECT_THAT(entries.out, HasSubstr("next page: "));
  auto lots = tallyctl({"accounts", "lots", id, "--state", "all"}, acme_app_key);
  EXPECT_EQ(lots.exit, 0) << lots.err;
  EXPECT_THAT(lots.out, HasSubstr("LOT  STATE"));

  const auto to = open_funded(0);
  auto moved = tallyctl({"--json", "transfer", "--from", id, "--to", to, "--amount", "40", "--biz-id", unique_id("t")});
  ASSERT_EQ(moved.exit, 0) << moved.err;
  const auto transfer = json::parse(moved.out);
  EXPECT_EQ(transfer["state"], "completed");
  auto back =
      tallyctl({"--json", "refund", "--original", transfer["saga_id"], "--amount", "15", "--biz-id", unique_id("r")});
  ASSERT_EQ(back.exit, 0) << back.err;
  EXPECT_EQ(json::parse(back.out)["refunded"]["amount"], 15);
  auto debit = tallyctl({"--json", "deduct", "--account", to, "--amount", "5", "--biz-id", unique_id("d")});
  EXPECT_EQ(json::parse(debit.out)["state"], "completed") << debit.out;
  EXPECT_EQ(json::parse(tallyctl({"--json", "accounts", "show", to, "--strong"}).out)["balance"], 20);
}

TEST_F(Tallyctl, OperatorsFindInspectWatchAndRepairSagas) {
  const auto id = open_funded(50);
  const auto waiting = held_deduction(client_, id, 10);
  const std::string saga = waiting["saga_id"];
  auto listed = tallyctl({"sagas", "list", "--state", "awaiting_confirmation", "--biz-id", waiting["biz_id"]});
  EXPECT_EQ(listed.exit, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(saga));
  auto counts = tallyctl({"sagas", "counts"});
  EXPECT_THAT(counts.out, HasSubstr("awaiting_confirmation"));
  auto shown = tallyctl({"sagas", "show", saga});
  EXPECT_EQ(shown.exit, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("hold_account"));
  EXPECT_THAT(shown.out, HasSubstr("timeline (every attempt, in the order sent)"));

  // watch follows the saga until it ends: once it has printed the state
  // it waits in, the app confirms it, and the change arrives live.
  run_result watched;
  const auto out = std::filesystem::temp_directory_path() / unique_id("watch");
  std::thread watcher([&] { watched = tallyctl({"sagas", "watch", saga}, acme_operator_key, "", out); });
  EXPECT_TRUE(
      eventually([&] { return slurp(out.string() + ".out").find("awaiting_confirmation") != std::string::npos; }));
  auto confirmed = post("/v1/deductions/" + saga + "/confirm?wait_ms=5000", json::object());
  EXPECT_EQ(confirmed.json()["state"], "completed") << confirmed.body;
  watcher.join();
  EXPECT_EQ(watched.exit, 0) << watched.err;
  EXPECT_THAT(watched.out, HasSubstr(saga + "  completed"));

  const auto other = held_deduction(client_, id, 5);
  auto aborted = tallyctl({"--json", "sagas", "abort", other["saga_id"]});
  ASSERT_EQ(aborted.exit, 0) << aborted.err;
  EXPECT_TRUE(eventually([&] {
    return json::parse(tallyctl({"--json", "sagas", "show", other["saga_id"]}).out)["state"] == "compensated";
  }));
  auto refused = tallyctl({"sagas", "retry", saga});
  EXPECT_EQ(refused.exit, 1);
  EXPECT_THAT(refused.err, HasSubstr("invalid_state"));
  EXPECT_EQ(json::parse(tallyctl({"--json", "accounts", "show", id, "--strong"}).out)["balance"], 40);

  // The account's three sagas (its funding credit, the two held deductions), newest first, then oldest first.
  auto by_account = json::parse(tallyctl({"--json", "sagas", "list", "--account", id}).out)["sagas"];
  ASSERT_EQ(by_account.size(), 3u) << by_account.dump();
  EXPECT_EQ(by_account[0]["saga_id"], other["saga_id"]);
  EXPECT_EQ(by_account[1]["saga_id"], saga);
  auto oldest = json::parse(tallyctl({"--json", "sagas", "list", "--account", id, "--oldest-first"}).out)["sagas"];
  ASSERT_EQ(oldest.size(), 3u) << oldest.dump();
  EXPECT_EQ(oldest[1]["saga_id"], saga);
  EXPECT_EQ(oldest[2]["saga_id"], other["saga_id"]);
  auto bad_time = tallyctl({"sagas", "list", "--created-after", "yesterday"});
  EXPECT_EQ(bad_time.exit, 1);
  EXPECT_THAT(bad_time.err, HasSubstr("created_after"));
}

TEST_F(Tallyctl, ReconcileRunsAndReports) {
  auto run = tallyctl({"reconcile", "run", "--shard", "0"});
  EXPECT_EQ(run.exit, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("0 with differences"));
  EXPECT_THAT(run.out, HasSubstr("incremental since"));
  auto full = tallyctl({"reconcile", "run", "--shard", "0", "--full"});
  EXPECT_EQ(full.exit, 0) << full.err;
  EXPECT_THAT(full.out, HasSubstr("full, watermark"));
  auto reports = tallyctl({"--json", "reconcile", "reports", "--shard", "0", "--limit", "2"});
  ASSERT_EQ(reports.exit, 0) << reports.err;
  const auto two = json::parse(reports.out)["reports"];
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0]["mode"], "full");
  EXPECT_EQ(two[1]["mode"], "incremental");
  EXPECT_EQ(tallyctl({"reconcile", "run", "--shard", "7"}).exit, 1);
}

TEST_F(Tallyctl, AuditsStartShowListAndCancel) {
  auto started = tallyctl({"--json", "reconcile", "audit", "start", "--shard", "0", "--no-freeze"});
  ASSERT_EQ(started.exit, 0) << started.err;
  const auto id = std::to_string(json::parse(started.out)["audit_id"].get<std::int64_t>());
  ASSERT_TRUE(eventually(
      [&] {
        return json::parse(tallyctl({"--json", "reconcile", "audit", "show", "--shard", "0", id}).out)["state"] ==
               "completed";
      },
      std::chrono::seconds(30)));
  auto shown = tallyctl({"reconcile", "audit", "show", "--shard", "0", id});
  EXPECT_EQ(shown.exit, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("audit " + id + ": completed"));
  EXPECT_THAT(shown.out, HasSubstr("(100.0 %), 0 with differences"));
  auto listed = tallyctl({"reconcile", "audit", "list", "--shard", "0"});
  EXPECT_EQ(listed.exit, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("completed"));
  auto cancelled = tallyctl({"reconcile", "audit", "cancel", "--shard", "0", id});
  EXPECT_EQ(cancelled.exit, 0) << cancelled.err;
  EXPECT_THAT(cancelled.out, HasSubstr(": completed"));
  auto missing = tallyctl({"reconcile", "audit", "show", "--shard", "0", "999999"});
  EXPECT_EQ(missing.exit, 1);
  EXPECT_THAT(missing.err, HasSubstr("not_found"));
  EXPECT_EQ(tallyctl({"reconcile", "audit", "show", "--shard", "0"}).exit, 2) << "the id is required";
}

TEST_F(Tallyctl, ErrorsAndUsage) {
  auto forbidden = tallyctl({"sagas", "list"}, acme_app_key);
  EXPECT_EQ(forbidden.exit, 1);
  EXPECT_THAT(forbidden.err, HasSubstr("forbidden"));
  auto missing = tallyctl({"accounts", "show", unique_id("nobody")}, acme_app_key);
  EXPECT_EQ(missing.exit, 1);
  EXPECT_THAT(missing.err, HasSubstr("not_found"));
  auto same = tallyctl({"transfer", "--from", "a", "--to", "a", "--amount", "1", "--biz-id", unique_id("t")});
  EXPECT_EQ(same.exit, 1);
  EXPECT_THAT(same.err, HasSubstr("invalid_request: from_account and to_account must differ"));
  EXPECT_EQ(tallyctl({"accounts", "show", "x"}, "not-a-key").exit, 1);
  EXPECT_EQ(tallyctl({"credit", "--account", "a", "--biz-id", "b"}).exit, 2);  // no --amount
  EXPECT_EQ(tallyctl({"sagas"}).exit, 2);
  EXPECT_EQ(tallyctl({"frobnicate"}).exit, 2);
  EXPECT_EQ(tallyctl({"accounts", "show", "x"}, "").exit, 2);  // no key
  EXPECT_EQ(tallyctl({"accounts", "show", "x"}, acme_app_key, "ftp://nowhere").exit, 2);
  auto unreachable = tallyctl({"accounts", "show", "x"}, acme_app_key, "http://127.0.0.1:1");
  EXPECT_EQ(unreachable.exit, 1);
  EXPECT_THAT(unreachable.err, HasSubstr("cannot reach"));
  for (const char* group : {"sagas", "accounts", "reconcile", "credit", "deduct", "transfer", "refund"}) {
    auto help = tallyctl({group, "--help"});
    EXPECT_EQ(help.exit, 0) << group;
    EXPECT_THAT(help.out, HasSubstr("Usage:")) << group;
  }
}

}  // namespace
}  // namespace tally::test
