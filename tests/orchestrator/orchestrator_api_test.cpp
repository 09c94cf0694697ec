// The orchestrator as a process, against two real shards: every saga type's
// success path and failure paths through the internal API, idempotency,
// bad input changing nothing, operator actions, and the faults of issue 3
// that need a shard stopped or its reply lost. An action on a saga another
// instance holds is answered on the holder's notification.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "tests/orchestrator/cluster.hpp"

namespace tally::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class OrchestratorApi : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = std::make_unique<cluster>();
    // Accounts on both shards: find two on each.
    for (int i = 0; accounts_[0].size() < 3 || accounts_[1].size() < 3; ++i) {
      auto id = "acc-" + std::to_string(i);
      accounts_[c_->shard_of(id)].push_back(id);
    }
    for (auto& side : accounts_)
      for (auto& a : side) c_->open(a, 100);
    orch_ = &c_->start_orchestrator();
    http_ = std::make_unique<http_client>(orch_->port());
  }
  void TearDown() override {
    if (HasFailure()) ADD_FAILURE() << "orchestrator log: " << orch_->log_path();
  }

  json run(const std::string& collection, const json& body, int expect_status = 200) {
    auto r = post_saga(*http_, collection, body);
    EXPECT_EQ(r.status, expect_status) << r.body;
    return r.json();
  }
  // One account on each shard.
  const std::string& a0(std::size_t i = 0) const { return accounts_[0].at(i); }
  const std::string& a1(std::size_t i = 0) const { return accounts_[1].at(i); }

  std::unique_ptr<cluster> c_;
  std::vector<std::string> accounts_[2];
  orchestrator_process* orch_ = nullptr;
  std::unique_ptr<http_client> http_;
};

TEST_F(OrchestratorApi, CreditDeductAndTransferComplete) {
  auto credit = run("credits", {{"account_id", a0()}, {"amount", 25}, {"biz_id", "c-1"}, {"memo", "welcome"}});
  EXPECT_EQ(credit["state"], "completed");
  EXPECT_EQ(credit["type"], "credit");
  EXPECT_EQ(c_->balance(a0()), 125);

  auto deduct = run("deductions", {{"account_id", a0()}, {"amount", 40}, {"biz_id", "d-1"}});
  EXPECT_EQ(deduct["state"], "completed");
  EXPECT_EQ(c_->balance(a0()), 85);

  auto transfer = run("transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 30}, {"biz_id", "t-1"}});
  EXPECT_EQ(transfer["state"], "completed") << transfer.dump();
  EXPECT_EQ(transfer["input"], (json{{"from_account", a0()}, {"to_account", a1()}, {"amount", 30}}));
  EXPECT_EQ(c_->balance(a0()), 55);
  EXPECT_EQ(c_->balance(a1()), 130);
  EXPECT_EQ(c_->held(a0()), 0);
  ASSERT_EQ(transfer["steps"].size(), 3u);
  EXPECT_EQ(transfer["steps"][1]["name"], "credit_destination");
  EXPECT_EQ(transfer["steps"][1]["state"], "succeeded");
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, BusinessRejectionsFailTheSagaAndChangeNoBalance) {
  auto poor = run("deductions", {{"account_id", a0()}, {"amount", 101}, {"biz_id", "d-poor"}});
  EXPECT_EQ(poor["state"], "failed");
  EXPECT_EQ(poor["error"]["code"], "insufficient_funds");
  EXPECT_EQ(poor["error"]["message"], "step debit_account was refused: insufficient_funds");
  // The failed step says why as well, in the same shape.
  EXPECT_EQ(poor["steps"][0]["error"],
            (json{{"code", "insufficient_funds"}, {"message", "the shard refused the call: insufficient_funds"}}));
  auto unknown = run("credits", {{"account_id", "nobody"}, {"amount", 5}, {"biz_id", "c-nobody"}});
  EXPECT_EQ(unknown["state"], "failed");
  EXPECT_EQ(unknown["error"]["code"], "account_not_found");

  http_client shard(c_->shards[0]->port());
  ASSERT_EQ(shard.call("POST", "/v1/accounts/t1/" + a0() + "/freeze").status, 200);
  auto frozen = run("transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 5}, {"biz_id", "t-frozen"}});
  EXPECT_EQ(frozen["state"], "failed");
  EXPECT_EQ(frozen["error"]["code"], "account_frozen");
  ASSERT_EQ(shard.call("POST", "/v1/accounts/t1/" + a0() + "/unfreeze").status, 200);

  auto poor_transfer =
      run("transfers", {{"from_account", a1()}, {"to_account", a0()}, {"amount", 500}, {"biz_id", "t-poor"}});
  EXPECT_EQ(poor_transfer["state"], "failed");
  EXPECT_EQ(poor_transfer["error"]["code"], "insufficient_funds");
  EXPECT_EQ(c_->balance(a0()), 100);
  EXPECT_EQ(c_->balance(a1()), 100);
  EXPECT_EQ(c_->held(a0()), 0);
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, RefundsAreCumulativeUpToTheOriginal) {
  auto deduct = run("deductions", {{"account_id", a0()}, {"amount", 60}, {"biz_id", "d-r"}});
  ASSERT_EQ(deduct["state"], "completed");
  const auto original = deduct["saga_id"].get<std::string>();
  auto first = run("refunds", {{"original_saga_id", original}, {"amount", 40}, {"biz_id", "r-1"}});
  EXPECT_EQ(first["state"], "completed") << first.dump();
  auto too_much = run("refunds", {{"original_saga_id", original}, {"amount", 21}, {"biz_id", "r-2"}});
  EXPECT_EQ(too_much["state"], "failed");
  EXPECT_EQ(too_much["error"]["code"], "refund_exceeds_original");
  auto rest = run("refunds", {{"original_saga_id", original}, {"amount", 20}, {"biz_id", "r-3"}});
  EXPECT_EQ(rest["state"], "completed");
  EXPECT_EQ(c_->balance(a0()), 100);

  auto transfer = run("transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 50}, {"biz_id", "t-r"}});
  ASSERT_EQ(transfer["state"], "completed");
  auto back = run("refunds", {{"original_saga_id", transfer["saga_id"]}, {"amount", 30}, {"biz_id", "r-t"}});
  EXPECT_EQ(back["state"], "completed") << back.dump();
  EXPECT_EQ(c_->balance(a0()), 80);
  EXPECT_EQ(c_->balance(a1()), 120);

  // Unknown originals and ones that are not deductions or transfers are refused.
  auto missing = post_saga(*http_, "refunds",
                           {{"original_saga_id", "sg_01JF0000000000000000000000"}, {"amount", 1}, {"biz_id", "r-x"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  auto credit = run("credits", {{"account_id", a1()}, {"amount", 5}, {"biz_id", "c-r"}});
  auto of_credit =
      post_saga(*http_, "refunds", {{"original_saga_id", credit["saga_id"]}, {"amount", 1}, {"biz_id", "r-c"}});
  EXPECT_EQ(of_credit.status, 409) << of_credit.body;
  EXPECT_EQ(of_credit.json()["error"]["code"], "invalid_state");
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

// Revoke of a batch deduction's items (the lesson-credit ledger's
// revokeConsume): one item in part, the rest of it, then all that is left
// of every item; each replayed; the original's view says what came back.
TEST_F(OrchestratorApi, BatchItemsAreRevokedOneAtATimeOrAllThatIsLeft) {
  json items = json::array({{{"account_id", a0()}, {"amount", 10}},
                            {{"account_id", a1()}, {"amount", 20}},
                            {{"account_id", a0(1)}, {"amount", 30}}});
  auto batch = run("batch-deductions", {{"biz_id", "b-rv"}, {"items", items}});
  ASSERT_EQ(batch["state"], "completed") << batch.dump();
  const std::string original = batch["saga_id"];
  auto refunded = [](std::int64_t total, std::vector<std::pair<std::string, std::int64_t>> per) {
    json j = {{"amount", total}, {"items", json::array()}};
    for (auto& [a, n] : per) j["items"].push_back({{"account_id", a}, {"amount", n}});
    return j;
  };

  const json part_body = {{"original_saga_id", original}, {"account_id", a1()}, {"amount", 5}, {"biz_id", "rv-part"}};
  auto part = run("refunds", part_body);
  EXPECT_EQ(part["state"], "completed") << part.dump();
  EXPECT_EQ(part["input"], (json{{"original_saga_id", original}, {"account_id", a1()}, {"amount", 5}}));
  EXPECT_EQ(part["refunded"], refunded(5, {{a1(), 5}}));
  auto rest = run("refunds", {{"original_saga_id", original}, {"account_id", a1()}, {"biz_id", "rv-rest"}});
  EXPECT_EQ(rest["refunded"], refunded(15, {{a1(), 15}})) << rest.dump();
  EXPECT_EQ(c_->balance(a1()), 100);
  EXPECT_EQ(c_->entries(a1(), rest["saga_id"]), 1);

  auto all = run("refunds", {{"original_saga_id", original}, {"biz_id", "rv-all"}});
  EXPECT_EQ(all["state"], "completed") << all.dump();
  // The item refunded already gives nothing more and writes no entry.
  EXPECT_EQ(all["refunded"], refunded(40, {{a0(), 10}, {a1(), 0}, {a0(1), 30}}));
  EXPECT_EQ(c_->entries(a1(), all["saga_id"]), 0);
  EXPECT_EQ(c_->entries(a0(1), all["saga_id"]), 1);
  for (const auto& a : {a0(), a1(), a0(1)}) EXPECT_EQ(c_->balance(a), 100) << a;

  // The same biz_id again is the same saga, never a second reversal.
  for (const auto& [body, first] :
       {std::pair<json, json>{part_body, part}, {{{"original_saga_id", original}, {"biz_id", "rv-all"}}, all}}) {
    auto again = post_saga(*http_, "refunds", body);
    EXPECT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.json()["saga_id"], first["saga_id"]);
    EXPECT_EQ(again.json()["refunded"], first["refunded"]);
  }
  for (const auto& a : {a0(), a1(), a0(1)}) EXPECT_EQ(c_->balance(a), 100) << a;
  EXPECT_EQ(c_->entries(a1(), part["saga_id"]), 1);
  EXPECT_EQ(c_->entries(a0(1), all["saga_id"]), 1);

  // Nothing is left: a later revoke of everything completes having given nothing.
  auto nothing = run("refunds", {{"original_saga_id", original}, {"biz_id", "rv-none"}});
  EXPECT_EQ(nothing["refunded"], refunded(0, {{a0(), 0}, {a1(), 0}, {a0(1), 0}})) << nothing.dump();
  auto over =
      run("refunds", {{"original_saga_id", original}, {"account_id", a0()}, {"amount", 1}, {"biz_id", "rv-over"}});
  EXPECT_EQ(over["state"], "failed");
  EXPECT_EQ(over["error"]["code"], "refund_exceeds_original");
  EXPECT_EQ(c_->entries(a0(), over["saga_id"]), 0);

  auto view = get_saga(*http_, original).json();
  EXPECT_EQ(view["refunded"], refunded(60, {{a0(), 10}, {a1(), 20}, {a0(1), 30}})) << view.dump();
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, BatchDeductIsAllOrNothingAcrossShards) {
  json ok_items = json::array({{{"account_id", a0()}, {"amount", 10}},
                               {{"account_id", a1()}, {"amount", 10}},
                               {{"account_id", a0(1)}, {"amount", 10}},
                               {{"account_id", a1(1)}, {"amount", 10}}});
  auto ok = run("batch-deductions", {{"biz_id", "b-ok"}, {"items", ok_items}});
  EXPECT_EQ(ok["state"], "completed") << ok.dump();
  for (const auto& a : {a0(), a1(), a0(1), a1(1)}) EXPECT_EQ(c_->balance(a), 90) << a;

  json short_items = json::array({{{"account_id", a0()}, {"amount", 10}},
                                  {{"account_id", a1()}, {"amount", 10}},
                                  {{"account_id", a1(2)}, {"amount", 101}}});
  auto failed = run("batch-deductions", {{"biz_id", "b-short"}, {"items", short_items}});
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["error"]["code"], "insufficient_funds");
  EXPECT_EQ(c_->balance(a0()), 90);
  EXPECT_EQ(c_->balance(a1()), 90);
  EXPECT_EQ(c_->balance(a1(2)), 100);
  for (const auto& a : {a0(), a1(), a1(2)}) EXPECT_EQ(c_->held(a), 0) << a;
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, HeldDeductionConfirmedCancelledAndTimedOut) {
  auto held =
      run("deductions", {{"account_id", a0()}, {"amount", 30}, {"biz_id", "h-1"}, {"hold_timeout_ms", 60000}}, 202);
  EXPECT_EQ(held["state"], "awaiting_confirmation");
  EXPECT_EQ(c_->held(a0()), 30);
  auto id = held["saga_id"].get<std::string>();
  auto confirmed = http_->call("POST", "/v1/tenants/t1/deductions/" + id + "/confirm?wait_ms=5000", "{}");
  ASSERT_EQ(confirmed.status, 200) << confirmed.body;
  EXPECT_EQ(confirmed.json()["state"], "completed");
  EXPECT_EQ(c_->balance(a0()), 70);
  EXPECT_EQ(c_->held(a0()), 0);
  auto cancel_after = http_->call("POST", "/v1/tenants/t1/deductions/" + id + "/cancel", "{}");
  EXPECT_EQ(cancel_after.status, 409) << cancel_after.body;

  auto second =
      run("deductions", {{"account_id", a0()}, {"amount", 20}, {"biz_id", "h-2"}, {"hold_timeout_ms", 60000}}, 202);
  auto cancelled = http_->call(
      "POST", "/v1/tenants/t1/deductions/" + second["saga_id"].get<std::string>() + "/cancel?wait_ms=5000", "{}");
  EXPECT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json()["state"], "compensated");
  EXPECT_EQ(c_->held(a0()), 0);
  EXPECT_EQ(c_->balance(a0()), 70);

  auto expiring =
      run("deductions", {{"account_id", a1()}, {"amount", 20}, {"biz_id", "h-3"}, {"hold_timeout_ms", 300}}, 202);
  auto expired = get_saga(*http_, expiring["saga_id"], 10000);
  EXPECT_EQ(expired.status, 200) << expired.body;
  EXPECT_EQ(expired.json()["state"], "compensated");
  EXPECT_EQ(expired.json()["error"]["code"], "hold_expired");
  EXPECT_EQ(c_->held(a1()), 0);
  EXPECT_EQ(c_->balance(a1()), 100);
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, TheSameBizIdTwentyTimesAtOnceIsOneSaga) {
  std::vector<std::thread> threads;
  std::vector<std::string> ids(20);
  std::vector<int> statuses(20);
  for (int i = 0; i < 20; ++i)
    threads.emplace_back([&, i] {
      http_client c(orch_->port());
      auto r =
          post_saga(c, "transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 7}, {"biz_id", "t-20"}});
      statuses[i] = r.status;
      ids[i] = r.json().value("saga_id", "");
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u);
  for (int s : statuses) EXPECT_EQ(s, 200);
  EXPECT_EQ(c_->sagas(), 1);
  EXPECT_EQ(c_->balance(a0()), 93);
  EXPECT_EQ(c_->balance(a1()), 107);

  // The same biz_id with other content is a conflict and changes nothing.
  auto conflict =
      post_saga(*http_, "transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 8}, {"biz_id", "t-20"}});
  EXPECT_EQ(conflict.status, 422) << conflict.body;
  EXPECT_EQ(conflict.json()["error"]["code"], "idempotency_conflict");
  auto replay =
      post_saga(*http_, "transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 7}, {"biz_id", "t-20"}});
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.json()["saga_id"], ids[0]);
  EXPECT_EQ(c_->sagas(), 1);
  EXPECT_EQ(c_->balance(a0()), 93);
}

TEST_F(OrchestratorApi, BadInputIsRefusedAndChangesNothing) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"credits", "{not json"},
      {"credits", R"({"account_id":"a b","amount":5,"biz_id":"x"})"},
      {"credits", R"({"account_id":"acc-0","amount":0,"biz_id":"x"})"},
      {"credits", R"({"account_id":"acc-0","amount":5,"biz_id":"x","extra":1})"},
      {"deductions", R"({"account_id":"acc-0","amount":1000000000000001,"biz_id":"x"})"},
      {"transfers", R"({"from_account":"acc-0","to_account":"acc-0","amount":5,"biz_id":"x"})"},
      {"batch-deductions", R"({"biz_id":"x","items":[]})"},
      {"batch-deductions",
       R"({"biz_id":"x","items":[{"account_id":"acc-0","amount":1},{"account_id":"acc-0","amount":2}]})"},
  };
  for (const auto& [collection, body] : bad) {
    auto r = http_->call("POST", "/v1/tenants/t1/" + collection, body);
    EXPECT_EQ(r.status, 400) << collection << " " << body << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "invalid_request");
  }
  EXPECT_EQ(
      http_->call("POST", "/v1/tenants/t1/credits?wait_ms=30001", R"({"account_id":"acc-0","amount":5,"biz_id":"x"})")
          .status,
      400);
  EXPECT_EQ(
      http_->call("POST", "/v1/tenants/t1/credits", R"({"account_id":"acc-0","amount":5,"biz_id":"x"})", "wrong-token")
          .status,
      401);
  EXPECT_EQ(c_->sagas(), 0);
  for (auto& side : accounts_)
    for (auto& a : side) EXPECT_EQ(c_->balance(a), 100);
}

// An id that is no saga's is 404 whatever its shape (one that is not even
// UTF-8 once decoded, too), on every route that names a saga.
TEST_F(OrchestratorApi, UnknownSagaIdsAreNotFoundWhateverTheirFormat) {
  for (const std::string id : {"sg_01JF0000000000000000000000", "sg_0123456789abcdef01234567", "not-a-saga", "%FF"}) {
    const auto saga = "/v1/tenants/t1/sagas/" + id, admin = "/v1/tenants/t1/admin/sagas/" + id;
    for (const auto& [method, target] :
         std::vector<std::pair<std::string, std::string>>{{"GET", saga},
                                                          {"GET", saga + "?wait_ms=10"},
                                                          {"GET", admin},
                                                          {"POST", "/v1/tenants/t1/deductions/" + id + "/confirm"},
                                                          {"POST", "/v1/tenants/t1/deductions/" + id + "/cancel"},
                                                          {"POST", admin + "/retry"},
                                                          {"POST", admin + "/abort"}}) {
      auto r = http_->call(method, target, method == "POST" ? "{}" : "");
      EXPECT_EQ(r.status, 404) << method << " " << target << " -> " << r.body;
      EXPECT_EQ(r.json()["error"]["code"], "not_found") << method << " " << target;
      EXPECT_TRUE(r.json()["error"]["message"].is_string()) << method << " " << target;
    }
  }
  EXPECT_EQ(c_->sagas(), 0);
}

// Confirm, cancel, retry and abort take no fields: any other body is 400
// and the saga goes on waiting as it was.
TEST_F(OrchestratorApi, ActionsRefuseABodyAndChangeNothing) {
  auto held =
      run("deductions", {{"account_id", a0()}, {"amount", 30}, {"biz_id", "h-body"}, {"hold_timeout_ms", 60000}}, 202);
  ASSERT_EQ(held["state"], "awaiting_confirmation");
  const auto id = held["saga_id"].get<std::string>();
  for (const auto& action : {"deductions/" + id + "/confirm", "deductions/" + id + "/cancel",
                             "admin/sagas/" + id + "/retry", "admin/sagas/" + id + "/abort"})
    for (const char* body : {R"({"amount":1})", "[]", "{", "null", R"("{}")", "{}{}"}) {
      auto r = http_->call("POST", "/v1/tenants/t1/" + action, body);
      EXPECT_EQ(r.status, 400) << action << " " << body << " -> " << r.body;
      EXPECT_EQ(r.json()["error"]["code"], "invalid_request") << action << " " << body;
    }
  auto after = get_saga(*http_, id);
  EXPECT_EQ(after.json()["state"], "awaiting_confirmation") << after.body;
  EXPECT_EQ(after.json()["steps"], held["steps"]);
  EXPECT_EQ(c_->held(a0()), 30);
  EXPECT_EQ(c_->balance(a0()), 100);
  // No body at all is as good as {}: the hold is still there to cancel.
  auto cancelled = http_->call("POST", "/v1/tenants/t1/deductions/" + id + "/cancel?wait_ms=5000", "");
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json()["state"], "compensated");
  EXPECT_EQ(c_->held(a0()), 0);
}

// GET /sagas pages like the operator's list: limit, cursor, next.
TEST_F(OrchestratorApi, AppsFindTheirSagasAPageAtATime) {
  // One biz_id names one saga per type.
  const std::set<std::string> created{
      run("credits", {{"account_id", a0()}, {"amount", 1}, {"biz_id", "p-1"}})["saga_id"].get<std::string>(),
      run("deductions", {{"account_id", a0()}, {"amount", 1}, {"biz_id", "p-1"}})["saga_id"].get<std::string>(),
      run("transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 1}, {"biz_id", "p-1"}})["saga_id"]
          .get<std::string>()};
  ASSERT_EQ(created.size(), 3u);
  auto first = http_->call("GET", "/v1/tenants/t1/sagas?biz_id=p-1&limit=2");
  ASSERT_EQ(first.status, 200) << first.body;
  const auto page1 = first.json();
  ASSERT_EQ(page1["sagas"].size(), 2u) << first.body;
  EXPECT_EQ(page1["next"], page1["sagas"][1]["saga_id"]);
  auto second =
      http_->call("GET", "/v1/tenants/t1/sagas?biz_id=p-1&limit=2&cursor=" + page1["next"].get<std::string>());
  ASSERT_EQ(second.status, 200) << second.body;
  const auto page2 = second.json();
  ASSERT_EQ(page2["sagas"].size(), 1u) << second.body;
  EXPECT_TRUE(page2["next"].is_null());
  const std::set<std::string> seen{page1["sagas"][0]["saga_id"].get<std::string>(),
                                   page1["sagas"][1]["saga_id"].get<std::string>(),
                                   page2["sagas"][0]["saga_id"].get<std::string>()};
  EXPECT_EQ(seen, created);
  for (const char* bad : {"limit=0", "limit=501", "limit=x", "cursor=nope"}) {
    auto r = http_->call("GET", std::string("/v1/tenants/t1/sagas?biz_id=p-1&") + bad);
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "invalid_request") << bad;
  }
}

TEST_F(OrchestratorApi, OperatorsListInspectAbortAndReadWorkflows) {
  auto t = run("transfers", {{"from_account", a0()}, {"to_account", a1()}, {"amount", 5}, {"biz_id", "t-op"}});
  run("deductions", {{"account_id", a1()}, {"amount", 500}, {"biz_id", "d-op"}});
  auto listed = http_->call("GET", "/v1/tenants/t1/admin/sagas?state=failed&limit=10");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json()["sagas"].size(), 1u);
  EXPECT_EQ(listed.json()["sagas"][0]["biz_id"], "d-op");
  EXPECT_TRUE(listed.json()["next"].is_null());
  auto page = http_->call("GET", "/v1/tenants/t1/admin/sagas?limit=1");
  EXPECT_EQ(page.json()["sagas"].size(), 1u);
  EXPECT_EQ(page.json()["next"], page.json()["sagas"][0]["saga_id"]);
  auto by_biz = http_->call("GET", "/v1/tenants/t1/sagas?type=transfer&biz_id=t-op");
  ASSERT_EQ(by_biz.json()["sagas"].size(), 1u);
  EXPECT_EQ(by_biz.json()["sagas"][0]["saga_id"], t["saga_id"]);

  auto detail = http_->call("GET", "/v1/tenants/t1/admin/sagas/" + t["saga_id"].get<std::string>());
  ASSERT_EQ(detail.status, 200);
  const auto history = detail.json()["history"];
  ASSERT_EQ(history.size(), 3u) << detail.body;
  EXPECT_EQ(history[0]["step"], "hold_source");
  EXPECT_EQ(history[0]["outcome"], "succeeded");
  EXPECT_EQ(history[0]["request"]["type"], "hold");
  EXPECT_EQ(history[2]["step"], "capture_source");

  auto abort = http_->call("POST", "/v1/tenants/t1/admin/sagas/" + t["saga_id"].get<std::string>() + "/abort", "{}");
  EXPECT_EQ(abort.status, 409) << abort.body;  // completed: past the pivot
  EXPECT_EQ(http_->call("GET", "/v1/tenants/other/sagas/" + t["saga_id"].get<std::string>()).status, 404);
  auto workflows = http_->call("GET", "/v1/workflows");
  EXPECT_EQ(workflows.status, 200);
  EXPECT_EQ(workflows.json()["workflows"].size(), 8u);
}

TEST_F(OrchestratorApi, DestinationDownBeforeThePivotCompensatesAndNoCreditAppearsLater) {
  c_->shards[1]->kill9();
  c_->shards[1]->wait_exit();
  const auto started = std::chrono::steady_clock::now();
  auto t = run(
      "transfers",
      {{"from_account", a0()}, {"to_account", a1()}, {"amount", 30}, {"biz_id", "t-down"}, {"timeout_ms", 2000}}, 200);
  // Compensated (the hold released, the credit never sent) and, as API.md
  // has it for a deadline, ended failed.
  EXPECT_EQ(t["state"], "failed") << t.dump();
  EXPECT_EQ(t["error"]["code"], "deadline_exceeded");
  EXPECT_LE(std::chrono::steady_clock::now() - started, 7s);  // the deadline plus 5 s
  EXPECT_EQ(c_->held(a0()), 0);
  c_->shards[1]->start();
  ASSERT_TRUE(c_->shards[1]->wait_ready());
  // The credit's key was cancelled on the destination: a late credit is refused.
  EXPECT_EQ(c_->entries(a1(), t["saga_id"]), 0);
  EXPECT_EQ(c_->balance(a1()), 100);
  EXPECT_EQ(c_->balance(a0()), 100);
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

TEST_F(OrchestratorApi, DestinationCreditedButItsReplyLostStillCompletes) {
  http_client shard(c_->shards[1]->port());
  ASSERT_EQ(shard.call("POST", "/v1/admin/failpoints", R"({"spec":"after_commit_before_reply=crash"})").status, 200);
  auto t = post_saga(*http_, "transfers",
                     {{"from_account", a0()}, {"to_account", a1()}, {"amount", 30}, {"biz_id", "t-lost"}}, 0);
  ASSERT_EQ(t.status, 202) << t.body;
  EXPECT_NE(c_->shards[1]->wait_exit(), -1);  // died after committing the credit
  c_->shards[1]->start();
  ASSERT_TRUE(c_->shards[1]->wait_ready());
  auto done = get_saga(*http_, t.json()["saga_id"], 15000);
  EXPECT_EQ(done.json()["state"], "completed") << done.body;
  EXPECT_EQ(c_->entries(a1(), t.json()["saga_id"]), 1);
  EXPECT_EQ(c_->balance(a1()), 130);
  EXPECT_EQ(c_->balance(a0()), 70);
  EXPECT_TRUE(c_->check_promises().empty()) << ::testing::PrintToString(c_->check_promises());
}

// Without a notification the result is read only every minute, so an answer
// within seconds came on the holder's NOTIFY (the default action timeout,
// 5 s, ends the wait otherwise).
TEST(OrchestratorInstances, AnActionOnASagaHeldByAnotherInstanceIsAnsweredOnTheHoldersNotification) {
  cluster c;
  c.open("held-0", 100);
  auto& holder = c.start_orchestrator({}, {"--instance=holder", "--action_recheck_ms=60000"});
  auto& other = c.start_orchestrator({}, {"--instance=other", "--action_recheck_ms=60000"});
  http_client to_holder(holder.port()), to_other(other.port());
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const auto biz_id = "held-" + std::to_string(i);
    // Its hold timeout is within the keep horizon: the holder keeps its lease.
    auto held = post_saga(to_holder, "deductions",
                          {{"account_id", "held-0"}, {"amount", 10}, {"biz_id", biz_id}, {"hold_timeout_ms", 8000}});
    ASSERT_EQ(held.json()["state"], "awaiting_confirmation") << held.body;
    const auto id = held.json()["saga_id"].get<std::string>();
    ASSERT_EQ(c.sagas("saga_id = '" + id + "' AND lease_owner LIKE 'holder:%'"), 1);
    const auto sent = std::chrono::steady_clock::now();
    auto confirmed = to_other.call("POST", "/v1/tenants/t1/deductions/" + id + "/confirm?wait_ms=5000", "{}");
    const auto took = std::chrono::steady_clock::now() - sent;
    ASSERT_EQ(confirmed.status, 200) << confirmed.body << "; " << other.log_path();
    EXPECT_EQ(confirmed.json()["state"], "completed") << confirmed.body;
    EXPECT_LT(took, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  }
  EXPECT_EQ(c.balance("held-0"), 70);
  auto problems = c.check_promises();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

}  // namespace
}  // namespace tally::test
