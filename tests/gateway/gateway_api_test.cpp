// The public API contract (shared/API.md) over real HTTP and WebSocket,
// against the whole system: two shards, the orchestrator, the relay, the
// gateway, PostgreSQL and Redis.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/time/rfc3339.hpp"
#include "tests/support/stack.hpp"
#include "tests/support/ws_client.hpp"

namespace tally::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class GatewayApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_options o;
    // Slow-header and ping tests need short timers; limits high enough not to interfere.
    o.gateway_args = {"--listen.header_timeout_ms=1000", "--stream.ping_interval_ms=300",
                      "--limits.key_rate=100000",        "--limits.key_burst=100000",
                      "--limits.account_rate=100000",    "--limits.account_burst=100000"};
    system_ = new stack(o);
  }
  static void TearDownTestSuite() {
    delete system_;
    system_ = nullptr;
  }

  http_reply call(const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& key = acme_app_key, const std::map<std::string, std::string>& headers = {}) {
    return client_.call(method, target, body, key, headers);
  }
  http_reply post(const std::string& target, const json& body, const std::string& key = acme_app_key) {
    return call("POST", target, body.dump(), key);
  }
  std::string open_funded(std::int64_t amount, const std::string& key = acme_app_key) {
    auto id = unique_id("acct");
    EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}, key).status, 201);
    if (amount > 0) {
      auto r = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", amount}, {"biz_id", unique_id("fund")}},
                    key);
      EXPECT_EQ(r.json()["state"], "completed") << r.body;
    }
    return id;
  }
  json account(const std::string& id, const std::string& key = acme_app_key) {
    auto r = call("GET", "/v1/accounts/" + id + "?consistency=strong", "", key);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }
  // The account's ledger entries, as a fingerprint of "nothing changed".
  std::string ledger(const std::string& id) { return call("GET", "/v1/accounts/" + id + "/entries?limit=500").body; }
  static void expect_error(const http_reply& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    const auto j = r.json();
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["error"]["code"], code) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["request_id"].is_string());
    EXPECT_EQ(r.header("x-request-id"), j["error"]["request_id"]);
  }

  static stack* system_;
  http_client client_{system_->gateway_port()};
};

stack* GatewayApi::system_ = nullptr;

TEST_F(GatewayApi, ServiceEndpointsNeedNoKey) {
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) EXPECT_EQ(call("GET", path, "", "").status, 200) << path;
  EXPECT_NE(call("GET", "/metrics", "", "").body.find("tally_gateway_requests_total"), std::string::npos);
}

// The relay's own API: its consumers, to the internal token only.
TEST_F(GatewayApi, TheRelayListsItsConsumersToTheInternalTokenOnly) {
  http_client relay(system_->relay().port());
  auto consumers = relay.call("GET", "/v1/consumers");
  ASSERT_EQ(consumers.status, 200) << consumers.body;
  std::set<std::string> sinks;
  const auto all = consumers.json()["consumers"];
  for (const auto& c : all) sinks.insert(c["sink"].get<std::string>());
  EXPECT_EQ(all.size(), 6u) << consumers.body;  // two shards and the orchestrator, each to both sinks
  EXPECT_EQ(sinks.size(), 2u) << consumers.body;
  EXPECT_EQ(relay.call("GET", "/v1/consumers", "", "wrong-token").status, 401);
  EXPECT_EQ(relay.call("GET", "/v1/nothing").status, 404);
  EXPECT_EQ(relay.call("POST", "/v1/consumers").status, 404);
}

TEST_F(GatewayApi, KeysAndRoles) {
  expect_error(call("GET", "/v1/sagas", "", ""), 401, "unauthorized");
  expect_error(call("GET", "/v1/sagas", "", "not-a-key"), 401, "unauthorized");
  expect_error(call("GET", "/v1/admin/sagas"), 403, "forbidden");
  expect_error(call("GET", "/v1/admin/workflows"), 403, "forbidden");
  EXPECT_EQ(call("GET", "/v1/admin/workflows", "", acme_operator_key).status, 200);
  // An operator key is an app key too.
  EXPECT_EQ(call("GET", "/v1/sagas", "", acme_operator_key).status, 200);
  expect_error(call("GET", "/v1/nothing"), 404, "not_found");
}

TEST_F(GatewayApi, RequestIdIsEchoed) {
  auto r = call("GET", "/v1/accounts/nobody-here", "", acme_app_key, {{"X-Request-Id", "trace-42"}});
  expect_error(r, 404, "not_found");
  EXPECT_EQ(r.header("x-request-id"), "trace-42");
  EXPECT_FALSE(call("GET", "/v1/sagas").header("x-request-id").empty());
}

TEST_F(GatewayApi, AccountsAreCreatedOnceAndRead) {
  const auto id = unique_id("alice");
  auto created = post("/v1/accounts", {{"account_id", id}});
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["account_id"], id);
  EXPECT_EQ(created.json()["balance"], 0);
  EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 200);
  const auto a = account(id);
  for (const char* field : {"account_id", "balance", "held", "available", "status", "version", "updated_at"})
    EXPECT_TRUE(a.contains(field)) << field;
  EXPECT_FALSE(a.contains("tenant"));
  EXPECT_EQ(a["status"], "active");
  expect_error(call("GET", "/v1/accounts/" + unique_id("nobody")), 404, "not_found");
}

TEST_F(GatewayApi, ReadsComeFromTheProjectionOnceTheRelayDelivered) {
  const auto id = open_funded(40);
  EXPECT_TRUE(eventually([&] {
    auto r = call("GET", "/v1/accounts/" + id);
    return r.header("x-tally-read") == "projection" && r.json()["balance"] == 40;
  }));
  EXPECT_EQ(call("GET", "/v1/accounts/" + id + "?consistency=strong").header("x-tally-read"), "authority");
}

TEST_F(GatewayApi, TenantsAreIsolated) {
  const auto id = open_funded(50);
  const std::string saga = held_deduction(client_, id, 5)["saga_id"];
  for (const auto& key : {std::string(globex_app_key), std::string(globex_operator_key)}) {
    expect_error(call("GET", "/v1/accounts/" + id, "", key), 404, "not_found");
    expect_error(call("GET", "/v1/accounts/" + id + "?consistency=strong", "", key), 404, "not_found");
    expect_error(call("GET", "/v1/accounts/" + id + "/entries", "", key), 404, "not_found");
    expect_error(call("GET", "/v1/sagas/" + saga, "", key), 404, "not_found");
    expect_error(call("POST", "/v1/deductions/" + saga + "/confirm", "{}", key), 404, "not_found");
  }
  expect_error(call("GET", "/v1/admin/sagas/" + saga, "", globex_operator_key), 404, "not_found");
  expect_error(call("POST", "/v1/admin/sagas/" + saga + "/abort", "{}", globex_operator_key), 404, "not_found");
  // globex's own account of the same name is another account.
  EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}, globex_app_key).status, 201);
  EXPECT_EQ(account(id, globex_app_key)["balance"], 0);
  EXPECT_EQ(account(id)["held"], 5);
}

TEST_F(GatewayApi, CreditsWaitReplayAndConflict) {
  const auto id = open_funded(0);
  const json body{{"account_id", id}, {"amount", 25}, {"biz_id", unique_id("c")}, {"memo", "welcome"}};
  auto first = post("/v1/credits?wait_ms=5000", body);
  EXPECT_EQ(first.status, 200) << first.body;
  const auto saga = first.json();
  EXPECT_EQ(saga["type"], "credit");
  EXPECT_EQ(saga["state"], "completed");
  for (const char* field : {"saga_id", "biz_id", "input", "error", "created_at", "updated_at", "deadline", "steps"})
    EXPECT_TRUE(saga.contains(field)) << field;
  EXPECT_TRUE(first.header("idempotent-replayed").empty());
  auto again = post("/v1/credits", body);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(again.json()["saga_id"], saga["saga_id"]);
  auto changed = body;
  changed["amount"] = 26;
  expect_error(post("/v1/credits", changed), 422, "idempotency_conflict");
  EXPECT_EQ(account(id)["balance"], 25);
  // Without wait_ms the saga is returned as soon as it is recorded.
  auto quick = post("/v1/credits", {{"account_id", id}, {"amount", 1}, {"biz_id", unique_id("c")}});
  EXPECT_TRUE(quick.status == 202 || quick.status == 200) << quick.status;
  const std::string quick_id = quick.json()["saga_id"];
  EXPECT_EQ(call("GET", "/v1/sagas/" + quick_id + "?wait_ms=5000").json()["state"], "completed");
}

TEST_F(GatewayApi, HeldDeductionsConfirmCancelAndRefuseTheWrongOrder) {
  const auto id = open_funded(100);
  const std::string held_id = held_deduction(client_, id, 30)["saga_id"];
  EXPECT_EQ(account(id)["held"], 30);
  auto confirmed = call("POST", "/v1/deductions/" + held_id + "/confirm?wait_ms=5000", "{}");
  EXPECT_EQ(confirmed.status, 200) << confirmed.body;
  EXPECT_EQ(confirmed.json()["state"], "completed");
  expect_error(call("POST", "/v1/deductions/" + held_id + "/cancel", "{}"), 409, "invalid_state");

  const std::string second_id = held_deduction(client_, id, 10)["saga_id"];
  auto cancelled = call("POST", "/v1/deductions/" + second_id + "/cancel?wait_ms=5000", "{}");
  EXPECT_EQ(cancelled.json()["state"], "compensated") << cancelled.body;
  expect_error(call("POST", "/v1/deductions/" + second_id + "/confirm", "{}"), 409, "invalid_state");
  const auto a = account(id);
  EXPECT_EQ(a["balance"], 70);
  EXPECT_EQ(a["held"], 0);
  // An immediate deduction.
  auto now = post("/v1/deductions?wait_ms=5000", {{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("d")}});
  EXPECT_EQ(now.json()["state"], "completed");
  expect_error(call("POST", "/v1/deductions/sg_00000000000000000000000000/confirm", "{}"), 404, "not_found");
}

TEST_F(GatewayApi, TransfersRefundsAndBusinessFailures) {
  const auto from = open_funded(100), to = open_funded(0);
  const auto other = open_funded(100);
  auto t = post("/v1/transfers?wait_ms=5000",
                {{"from_account", from}, {"to_account", to}, {"amount", 40}, {"biz_id", unique_id("t")}});
  EXPECT_EQ(t.json()["state"], "completed") << t.body;
  EXPECT_EQ(t.json()["steps"].size(), 3u);
  const std::string transfer = t.json()["saga_id"];
  auto overdraft = post("/v1/transfers?wait_ms=5000",
                        {{"from_account", from}, {"to_account", to}, {"amount", 1000}, {"biz_id", unique_id("t")}});
  EXPECT_EQ(overdraft.status, 200);
  EXPECT_EQ(overdraft.json()["state"], "failed");
  EXPECT_EQ(overdraft.json()["error"]["code"], "insufficient_funds");
  EXPECT_TRUE(overdraft.json()["error"]["message"].is_string());
  // The failed step says why too, code and message.
  EXPECT_EQ(overdraft.json()["steps"][0]["error"],
            (json{{"code", "insufficient_funds"}, {"message", "the shard refused the call: insufficient_funds"}}))
      << overdraft.body;
  auto missing =
      post("/v1/transfers?wait_ms=5000",
           {{"from_account", from}, {"to_account", unique_id("ghost")}, {"amount", 1}, {"biz_id", unique_id("t")}});
  EXPECT_EQ(missing.json()["error"]["code"], "account_not_found") << missing.body;
  auto refund =
      post("/v1/refunds?wait_ms=5000", {{"original_saga_id", transfer}, {"amount", 15}, {"biz_id", unique_id("r")}});
  EXPECT_EQ(refund.json()["state"], "completed") << refund.body;
  // A refund of a transfer takes the value back from its destination first.
  auto short_of =
      post("/v1/refunds?wait_ms=5000", {{"original_saga_id", transfer}, {"amount", 26}, {"biz_id", unique_id("r")}});
  EXPECT_EQ(short_of.json()["error"]["code"], "insufficient_funds") << short_of.body;
  post("/v1/transfers?wait_ms=5000",
       {{"from_account", other}, {"to_account", to}, {"amount", 50}, {"biz_id", unique_id("t")}});
  auto too_much =
      post("/v1/refunds?wait_ms=5000", {{"original_saga_id", transfer}, {"amount", 26}, {"biz_id", unique_id("r")}});
  EXPECT_EQ(too_much.json()["state"], "failed");
  EXPECT_EQ(too_much.json()["error"]["code"], "refund_exceeds_original");
  EXPECT_EQ(account(from)["balance"], 75);
  EXPECT_EQ(account(to)["balance"], 75);
  EXPECT_EQ(account(to)["held"], 0);
}

TEST_F(GatewayApi, BatchDeductionsAllOrNothing) {
  const auto a = open_funded(10), b = open_funded(10), poor = open_funded(0);
  auto ok = post("/v1/batch-deductions?wait_ms=5000",
                 {{"biz_id", unique_id("class")},
                  {"items", {{{"account_id", a}, {"amount", 1}}, {{"account_id", b}, {"amount", 2}}}}});
  EXPECT_EQ(ok.json()["state"], "completed") << ok.body;
  auto refused = post("/v1/batch-deductions?wait_ms=5000",
                      {{"biz_id", unique_id("class")},
                       {"items", {{{"account_id", a}, {"amount", 1}}, {{"account_id", poor}, {"amount", 1}}}}});
  EXPECT_NE(refused.json()["state"], "completed") << refused.body;
  EXPECT_EQ(account(a)["balance"], 9);
  EXPECT_EQ(account(a)["held"], 0);
  EXPECT_EQ(account(b)["balance"], 8);
}

// A revoke names an item of an original of its own tenant and no more than
// is left of it; anything else gets the documented error and writes nothing.
// The original's plain GET says what came back per item (its refunds change
// it after it finished: the orchestrator answers); a refund's own view comes
// from the projection like any saga's.
TEST_F(GatewayApi, RevokesOfBatchItemsAndTheirRefusals) {
  const auto a = open_funded(10), b = open_funded(10);
  auto batch = post("/v1/batch-deductions?wait_ms=5000",
                    {{"biz_id", unique_id("class")},
                     {"items", {{{"account_id", a}, {"amount", 4}}, {{"account_id", b}, {"amount", 6}}}}});
  ASSERT_EQ(batch.json()["state"], "completed") << batch.body;
  const std::string original = batch.json()["saga_id"];
  const auto before_a = ledger(a), before_b = ledger(b);
  auto refunds_named = [&](const std::string& biz) {
    auto r = call("GET", "/v1/sagas?type=refund&biz_id=" + biz);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["sagas"].size();
  };

  const auto ghost = unique_id("r");
  expect_error(
      post("/v1/refunds", {{"original_saga_id", original}, {"account_id", unique_id("nobody")}, {"biz_id", ghost}}),
      404, "not_found");
  EXPECT_EQ(refunds_named(ghost), 0u);
  const auto foreign = unique_id("r");
  expect_error(
      post("/v1/refunds", {{"original_saga_id", original}, {"account_id", a}, {"biz_id", foreign}}, globex_app_key),
      404, "not_found");
  const auto vague = unique_id("r");
  expect_error(post("/v1/refunds", {{"original_saga_id", original}, {"amount", 1}, {"biz_id", vague}}), 400,
               "invalid_request");
  EXPECT_EQ(refunds_named(vague), 0u);
  auto over = post("/v1/refunds?wait_ms=5000",
                   {{"original_saga_id", original}, {"account_id", a}, {"amount", 5}, {"biz_id", unique_id("r")}});
  EXPECT_EQ(over.json()["state"], "failed") << over.body;
  EXPECT_EQ(over.json()["error"]["code"], "refund_exceeds_original");
  EXPECT_EQ(ledger(a), before_a);
  EXPECT_EQ(ledger(b), before_b);

  auto all = post("/v1/refunds?wait_ms=5000", {{"original_saga_id", original}, {"biz_id", unique_id("r")}});
  EXPECT_EQ(all.json()["state"], "completed") << all.body;
  EXPECT_EQ(all.json()["refunded"]["amount"], 10);
  EXPECT_EQ(account(a)["balance"], 10);
  EXPECT_EQ(account(b)["balance"], 10);
  // Until the relay has delivered the original's completion its projection
  // may still say it runs (and is served); once it says completed, the
  // orchestrator answers.
  const json refunded{{"amount", 10},
                      {"items", {{{"account_id", a}, {"amount", 4}}, {{"account_id", b}, {"amount", 6}}}}};
  std::string last;
  EXPECT_TRUE(eventually([&] {
    auto view = call("GET", "/v1/sagas/" + original);
    last = view.body;
    if (view.json()["state"] != "completed") return false;
    EXPECT_EQ(view.header("x-tally-read"), "authority");
    return view.json()["refunded"] == refunded;
  })) << last;
  const std::string revoke = all.json()["saga_id"];
  EXPECT_TRUE(eventually([&] {
    auto r = call("GET", "/v1/sagas/" + revoke);
    return r.header("x-tally-read") == "projection" && r.json()["refunded"] == all.json()["refunded"];
  }));
}

// Ids may hold ':' (API.md), which many clients percent-encode in paths and
// query strings: the encoded and the plain spelling name the same object.
TEST_F(GatewayApi, PercentEncodedIdsNameTheSameObjects) {
  const auto id = unique_id("team:alice");
  EXPECT_EQ(post("/v1/accounts", {{"account_id", id}}).status, 201);
  auto encoded = id;
  encoded.replace(encoded.find(':'), 1, "%3A");
  auto a = call("GET", "/v1/accounts/" + encoded + "?consistency=strong");
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json()["account_id"], id);
  EXPECT_EQ(call("GET", "/v1/accounts/" + encoded + "/entries").status, 200);

  const auto biz = unique_id("order:1");
  auto credit = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 3}, {"biz_id", biz}});
  EXPECT_EQ(credit.status, 200) << credit.body;
  auto encoded_biz = biz;
  encoded_biz.replace(encoded_biz.find(':'), 1, "%3a");
  auto found = call("GET", "/v1/sagas?type=credit&biz_id=" + encoded_biz);
  ASSERT_EQ(found.json()["sagas"].size(), 1u) << found.body;
  EXPECT_EQ(found.json()["sagas"][0]["saga_id"], credit.json()["saga_id"]);
  // What decodes to no valid id is refused.
  expect_error(call("GET", "/v1/accounts/acc%2Fx"), 400, "invalid_request");
  expect_error(call("GET", "/v1/accounts/acc%zz"), 400, "invalid_request");
}

TEST_F(GatewayApi, SagasAreFoundByIdAndBusinessKey) {
  const auto id = open_funded(0);
  const auto biz = unique_id("c");
  auto r = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 3}, {"biz_id", biz}});
  const std::string saga = r.json()["saga_id"];
  auto one = call("GET", "/v1/sagas/" + saga);
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["saga_id"], saga);
  auto found = call("GET", "/v1/sagas?type=credit&biz_id=" + biz);
  ASSERT_EQ(found.json()["sagas"].size(), 1u) << found.body;
  EXPECT_EQ(found.json()["sagas"][0]["saga_id"], saga);
  EXPECT_EQ(call("GET", "/v1/sagas?type=transfer&biz_id=" + biz).json()["sagas"].size(), 0u);
  expect_error(call("GET", "/v1/sagas/sg_00000000000000000000000000"), 404, "not_found");
  expect_error(call("GET", "/v1/sagas/not-a-saga"), 404, "not_found");
  expect_error(call("GET", "/v1/sagas/" + saga + "?wait_ms=30001"), 400, "invalid_request");
}

// An id that names no saga is 404 whatever its shape, on the app's and the
// operator's routes alike; a refund's original_saga_id is a field of the
// body: malformed it is 400, well-formed and unknown 404.
TEST_F(GatewayApi, UnknownSagaIdsAreNotFoundWhateverTheirFormat) {
  const std::string op = acme_operator_key;
  for (const auto& id : std::vector<std::string>{"sg_01JF0000000000000000000000", "sg_0123456789abcdef01234567",
                                                 "not-a-saga", "%FF", std::string(100, 'x')}) {
    expect_error(call("GET", "/v1/sagas/" + id), 404, "not_found");
    expect_error(call("GET", "/v1/sagas/" + id + "?consistency=strong"), 404, "not_found");
    expect_error(call("GET", "/v1/sagas/" + id + "?wait_ms=10"), 404, "not_found");
    expect_error(call("POST", "/v1/deductions/" + id + "/confirm", "{}"), 404, "not_found");
    expect_error(call("POST", "/v1/deductions/" + id + "/cancel", "{}"), 404, "not_found");
    expect_error(call("GET", "/v1/admin/sagas/" + id, "", op), 404, "not_found");
    expect_error(call("POST", "/v1/admin/sagas/" + id + "/retry", "{}", op), 404, "not_found");
    expect_error(call("POST", "/v1/admin/sagas/" + id + "/abort", "{}", op), 404, "not_found");
  }
  const auto biz = unique_id("r");
  expect_error(
      post("/v1/refunds", {{"original_saga_id", "sg_0123456789abcdef01234567"}, {"amount", 1}, {"biz_id", biz}}), 400,
      "invalid_request");
  expect_error(
      post("/v1/refunds", {{"original_saga_id", "sg_01JF0000000000000000000000"}, {"amount", 1}, {"biz_id", biz}}), 404,
      "not_found");
  EXPECT_EQ(call("GET", "/v1/sagas?type=refund&biz_id=" + biz).json()["sagas"].size(), 0u);
}

// Confirm and cancel (and an operator's retry and abort) take no fields:
// another body is 400 and the held deduction waits on as it was.
TEST_F(GatewayApi, ActionsRefuseABodyAndChangeNothing) {
  const auto id = open_funded(100);
  const auto held = held_deduction(client_, id, 30);
  const std::string saga = held["saga_id"];
  const auto before = ledger(id);
  for (const auto& [action, key] :
       std::vector<std::pair<std::string, std::string>>{{"/v1/deductions/" + saga + "/confirm", acme_app_key},
                                                        {"/v1/deductions/" + saga + "/cancel", acme_app_key},
                                                        {"/v1/admin/sagas/" + saga + "/retry", acme_operator_key},
                                                        {"/v1/admin/sagas/" + saga + "/abort", acme_operator_key}})
    for (const char* body : {R"({"amount":1})", "[]", "{", "null", R"("{}")", "{}{}"})
      expect_error(call("POST", action, body, key), 400, "invalid_request");
  auto after = call("GET", "/v1/sagas/" + saga + "?consistency=strong");
  EXPECT_EQ(after.json()["state"], "awaiting_confirmation") << after.body;
  EXPECT_EQ(after.json()["steps"], held["steps"]);
  EXPECT_EQ(account(id)["held"], 30);
  EXPECT_EQ(ledger(id), before);
  // No body at all is as good as {}: the hold is still there to cancel.
  auto cancelled = call("POST", "/v1/deductions/" + saga + "/cancel?wait_ms=5000", "");
  EXPECT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json()["state"], "compensated");
  EXPECT_EQ(account(id)["held"], 0);
}

// Each route reads only as much body as it takes: an action 1 KiB (of
// white space, which it would accept); refused before the body is read,
// before the key is looked at, and nothing changes. (A GET reads none:
// tests/common/http_test.cpp has the server's side; the OpenAPI file
// documents 413 per operation only where there is a body.)
TEST_F(GatewayApi, ABodyOverItsRoutesLimitIs413AndChangesNothing) {
  const auto id = open_funded(100);
  const auto held = held_deduction(client_, id, 30);
  const std::string saga = held["saga_id"];
  const auto before = ledger(id);
  expect_error(call("POST", "/v1/deductions/" + saga + "/confirm", std::string(1025, ' ')), 413, "payload_too_large");
  expect_error(call("POST", "/v1/admin/accounts/" + id + "/freeze", std::string(1025, ' '), acme_operator_key), 413,
               "payload_too_large");
  expect_error(call("POST", "/v1/deductions/" + saga + "/cancel", std::string(1025, ' '), ""), 413,
               "payload_too_large");
  auto after = call("GET", "/v1/sagas/" + saga + "?consistency=strong");
  EXPECT_EQ(after.json()["state"], "awaiting_confirmation") << after.body;
  EXPECT_EQ(account(id)["status"], "active");
  EXPECT_EQ(account(id)["held"], 30);
  EXPECT_EQ(ledger(id), before);
  // Up to the limit the action is served.
  auto confirmed = call("POST", "/v1/deductions/" + saga + "/confirm?wait_ms=5000", std::string(1024, ' '));
  EXPECT_EQ(confirmed.status, 200) << confirmed.body;
}

// A write just under the public 64 KiB reaches the orchestrator: its
// canonical form (tenant, type and hash added) is larger than the body.
TEST_F(GatewayApi, AWriteJustUnderTheBodyLimitIsForwardedWhole) {
  const auto prefix = unique_id("big");
  const std::size_t limit = 64 * 1024;
  nlohmann::json body{{"biz_id", unique_id("big")}, {"items", nlohmann::json::array()}};
  for (int i = 0; i < 1000; ++i) {
    auto account = prefix + "-" + std::to_string(i);
    account += std::string(36 - account.size(), 'x');
    body["items"].push_back({{"account_id", account}, {"amount", 1}});
  }
  // Amounts of 100 instead of 1 take up what is left, to 40 bytes short of
  // the limit: the canonical form adds more than that.
  auto room = static_cast<std::int64_t>(limit) - 40 - static_cast<std::int64_t>(body.dump().size());
  for (auto& item : body["items"])
    if (room >= 2) {
      item["amount"] = 100;
      room -= 2;
    }
  const auto text = body.dump();
  ASSERT_LE(text.size(), limit);
  ASSERT_GT(text.size(), limit - 45) << "the body must come close to the limit";
  auto r = call("POST", "/v1/batch-deductions", text);
  ASSERT_TRUE(r.status == 200 || r.status == 202) << r.status << " " << r.body.substr(0, 300);
  EXPECT_EQ(r.json()["type"], "batch_deduct");
  EXPECT_EQ(r.json()["input"]["items"].size(), 1000u);
}

// GET /v1/sagas pages like the operator's list: limit, cursor, next.
TEST_F(GatewayApi, SagasAreListedAPageAtATime) {
  const auto from = open_funded(10), to = open_funded(0);
  const auto biz = unique_id("paged");  // one biz_id names one saga per type
  const std::set<std::string> created{
      post("/v1/credits", {{"account_id", from}, {"amount", 1}, {"biz_id", biz}}).json()["saga_id"].get<std::string>(),
      post("/v1/deductions", {{"account_id", from}, {"amount", 1}, {"biz_id", biz}})
          .json()["saga_id"]
          .get<std::string>(),
      post("/v1/transfers", {{"from_account", from}, {"to_account", to}, {"amount", 1}, {"biz_id", biz}})
          .json()["saga_id"]
          .get<std::string>()};
  ASSERT_EQ(created.size(), 3u);
  std::vector<std::string> seen;
  std::vector<std::size_t> pages;
  std::string cursor;
  while (pages.size() < 5) {
    auto r = call("GET", "/v1/sagas?biz_id=" + biz + "&limit=2" + (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(r.status, 200) << r.body;
    const auto j = r.json();
    ASSERT_TRUE(j.contains("next")) << r.body;
    pages.push_back(j["sagas"].size());
    for (const auto& saga : j["sagas"]) seen.push_back(saga["saga_id"]);
    if (j["next"].is_null()) break;
    EXPECT_EQ(j["next"], j["sagas"].back()["saga_id"]);
    cursor = j["next"];
  }
  EXPECT_EQ(pages, (std::vector<std::size_t>{2, 1}));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), created);
  EXPECT_EQ(seen.size(), created.size());
  for (const char* bad : {"limit=0", "limit=501", "limit=x", "cursor=nope"})
    expect_error(call("GET", "/v1/sagas?biz_id=" + biz + "&" + bad), 400, "invalid_request");
}

// An operator may ask to wait longer than the gateway waits for the
// orchestrator: the wait is cut to that time-out, and the saga comes back.
TEST_F(GatewayApi, OperatorWaitsAreCappedNotRefused) {
  const auto id = open_funded(10);
  const std::string saga = held_deduction(client_, id, 3)["saga_id"];
  const auto started = std::chrono::steady_clock::now();
  auto r = call("GET", "/v1/admin/sagas/" + saga + "?wait_ms=30000", "", acme_operator_key);
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.json()["state"], "awaiting_confirmation");
  EXPECT_TRUE(r.json()["history"].is_array());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 25s);
}

TEST_F(GatewayApi, EntriesArePaged) {
  const auto id = open_funded(0);
  for (int i = 0; i < 5; ++i)
    post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", i + 1}, {"biz_id", unique_id("c")}});
  std::vector<std::int64_t> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    auto r = call("GET", "/v1/accounts/" + id + "/entries?limit=2" + (after.empty() ? "" : "&after=" + after));
    ASSERT_EQ(r.status, 200) << r.body;
    const auto j = r.json();
    for (const auto& e : j["entries"]) {
      for (const char* field : {"seq", "biz_type", "biz_id", "delta", "balance_after", "created_at"})
        EXPECT_TRUE(e.contains(field)) << field;
      seen.push_back(e["delta"]);
    }
    if (j["next"].is_null()) break;
    after = j["next"];
  }
  EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));  // the opening entry, then the credits
  expect_error(call("GET", "/v1/accounts/" + id + "/entries?limit=501"), 400, "invalid_request");
  expect_error(call("GET", "/v1/accounts/" + id + "/entries?limit=0"), 400, "invalid_request");
  expect_error(call("GET", "/v1/accounts/" + id + "/entries?after=x"), 400, "invalid_request");
}

TEST_F(GatewayApi, BadInputIsRefusedAndChangesNothing) {
  const auto id = open_funded(100);
  const auto before = ledger(id);
  const auto biz = unique_id("bad");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/v1/credits", "{"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":5,"biz_id":")" + biz},  // truncated
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":"5","biz_id":")" + biz + "\"}"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":5.5,"biz_id":")" + biz + "\"}"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":0,"biz_id":")" + biz + "\"}"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":1000000000000001,"biz_id":")" + biz + "\"}"},
      {"/v1/credits",
       R"({"account_id":")" + id + R"(","amount":123456789012345678901234567890,"biz_id":")" + biz + "\"}"},
      {"/v1/credits", R"({"account_id":"bad id!","amount":5,"biz_id":")" + biz + "\"}"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":5,"biz_id":")" + std::string(65, 'x') + "\"}"},
      {"/v1/credits", R"({"account_id":")" + id + R"(","amount":5,"biz_id":")" + biz + R"(","colour":"red"})"},
      {"/v1/credits", R"({"amount":5,"biz_id":")" + biz + "\"}"},
      {"/v1/credits", "[]"},
      {"/v1/deductions", R"({"account_id":")" + id + R"(","amount":5,"biz_id":")" + biz + R"(","hold_timeout_ms":-1})"},
      {"/v1/transfers",
       R"({"from_account":")" + id + R"(","to_account":")" + id + R"(","amount":5,"biz_id":")" + biz + "\"}"},
      {"/v1/batch-deductions", R"({"biz_id":")" + biz + R"(","items":[]})"},
      {"/v1/batch-deductions", R"({"biz_id":")" + biz + R"(","items":[{"account_id":")" + id +
                                   R"(","amount":1},{"account_id":")" + id + R"(","amount":1}]})"},
      {"/v1/refunds", R"({"original_saga_id":"nope","amount":5,"biz_id":")" + biz + "\"}"},
      {"/v1/accounts", R"({"account_id":""})"},
      {"/v1/credits?wait_ms=abc", R"({"account_id":")" + id + R"(","amount":5,"biz_id":")" + biz + "\"}"},
  };
  for (const auto& [path, body] : bad) expect_error(call("POST", path, body), 400, "invalid_request");
  // 1 MiB: refused before it is read whole.
  auto huge = call("POST", "/v1/credits", std::string(1024 * 1024, ' '));
  EXPECT_TRUE(huge.status == 413 || huge.status == 400) << huge.status;
  EXPECT_EQ(huge.json()["error"]["code"], huge.status == 413 ? "payload_too_large" : "invalid_request");
  EXPECT_EQ(ledger(id), before);
  EXPECT_EQ(account(id)["balance"], 100);
  for (const char* type : {"credit", "deduct", "transfer", "batch_deduct", "refund"})
    EXPECT_EQ(call("GET", std::string("/v1/sagas?type=") + type + "&biz_id=" + biz).json()["sagas"].size(), 0u);
}

TEST_F(GatewayApi, SlowHeadersTimeOut) {
  http_client slow(system_->gateway_port());
  const auto start = std::chrono::steady_clock::now();
  // Half a request line, then nothing: the server gives up at its header timeout.
  auto r = slow.raw("GET /v1/sagas HTTP/1.1\r\nHost: x\r\n");
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(call("GET", "/healthz", "", "").status, 200);
}

TEST_F(GatewayApi, OperatorEndpoints) {
  const auto id = open_funded(20);
  auto t = post("/v1/deductions?wait_ms=5000", {{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("d")}});
  const std::string saga = t.json()["saga_id"];
  const std::string op = acme_operator_key;
  auto list = call("GET", "/v1/admin/sagas?state=completed&type=deduct&limit=1", "", op);
  EXPECT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json()["sagas"].size(), 1u);
  EXPECT_TRUE(list.json().contains("next"));
  auto detail = call("GET", "/v1/admin/sagas/" + saga, "", op);
  EXPECT_EQ(detail.status, 200);
  ASSERT_TRUE(detail.json()["history"].is_array());
  EXPECT_GE(detail.json()["history"].size(), 1u);
  expect_error(call("POST", "/v1/admin/sagas/" + saga + "/abort", "{}", op), 409, "invalid_state");
  expect_error(call("POST", "/v1/admin/sagas/" + saga + "/retry", "{}", op), 409, "invalid_state");
  auto workflows = call("GET", "/v1/admin/workflows", "", op);
  EXPECT_GE(workflows.json()["workflows"].size(), 5u);
  auto shards = call("GET", "/v1/admin/shards", "", op);
  ASSERT_EQ(shards.json()["shards"].size(), 2u) << shards.body;
  EXPECT_EQ(shards.json()["shards"][0]["health"], "ok");
  EXPECT_EQ(shards.json()["shards"][0]["leader"], true);
  EXPECT_TRUE(shards.json()["shards"][0]["outbox"].is_object());
  EXPECT_EQ(shards.json()["shards"][0]["admission"]["max_wait_ms"], 20.0) << shards.body;
  EXPECT_TRUE(shards.json()["shards"][0]["admission"]["hottest"].is_array());
  // Single servers: no monitor to show (the replicated view: test_console.py's test_9).
  auto clusters = call("GET", "/v1/admin/clusters", "", op);
  EXPECT_EQ(clusters.body, R"({"configured":false,"formations":[]})");
  expect_error(call("GET", "/v1/admin/clusters"), 403, "forbidden");
  auto report = call("GET", "/v1/admin/reconciliation?shard=0", "", op);
  EXPECT_EQ(report.status, 200) << report.body;
  EXPECT_EQ(report.json()["differences"], 0);
  EXPECT_EQ(report.json()["mode"], "incremental");
  auto full = call("GET", "/v1/admin/reconciliation?shard=0&mode=full", "", op);
  EXPECT_EQ(full.json()["mode"], "full") << full.body;
  EXPECT_EQ(full.json()["differences"], 0);
  EXPECT_GE(full.json()["accounts"], report.json()["accounts"]);
  expect_error(call("GET", "/v1/admin/reconciliation?shard=2", "", op), 400, "invalid_request");
  expect_error(call("GET", "/v1/admin/reconciliation?shard=0&mode=all", "", op), 400, "invalid_request");
  auto frozen = call("POST", "/v1/admin/accounts/" + id + "/freeze", "{}", op);
  EXPECT_EQ(frozen.json()["status"], "frozen") << frozen.body;
  auto refused = post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 1}, {"biz_id", unique_id("c")}});
  EXPECT_EQ(refused.json()["error"]["code"], "account_frozen") << refused.body;
  EXPECT_EQ(call("POST", "/v1/admin/accounts/" + id + "/unfreeze", "{}", op).json()["status"], "active");
  expect_error(call("POST", "/v1/admin/accounts/" + unique_id("ghost") + "/freeze", "{}", op), 404, "not_found");
}

// What the console and tallyctl use (docs/api-additions.md, "Operators'
// tools"): counts per state, filters, frozen accounts, recorded
// reconciliation runs, health; each refused to an app key.
TEST_F(GatewayApi, OperatorToolsEndpoints) {
  const std::string op = acme_operator_key;
  const auto id = open_funded(20);
  const auto biz = unique_id("d");
  auto t = post("/v1/deductions?wait_ms=5000", {{"account_id", id}, {"amount", 5}, {"biz_id", biz}});
  ASSERT_EQ(t.json()["state"], "completed") << t.body;

  auto counts = call("GET", "/v1/admin/sagas/counts", "", op);
  ASSERT_EQ(counts.status, 200) << counts.body;
  for (const char* state : {"pending", "running", "awaiting_confirmation", "compensating", "completed", "failed",
                            "compensated", "needs_attention"})
    EXPECT_TRUE(counts.json()["counts"][state].is_number_integer()) << state;
  EXPECT_GE(counts.json()["counts"]["completed"], 2);  // the funding credit and the deduction
  EXPECT_TRUE(counts.json()["overdue"].is_number_integer());
  auto by_biz = call("GET", "/v1/admin/sagas?biz_id=" + biz, "", op);
  ASSERT_EQ(by_biz.json()["sagas"].size(), 1u) << by_biz.body;
  EXPECT_EQ(by_biz.json()["sagas"][0]["saga_id"], t.json()["saga_id"]);
  // Nothing of this tenant is stuck: a completed saga is never overdue.
  auto overdue = call("GET", "/v1/admin/sagas?overdue=true&biz_id=" + biz, "", op);
  EXPECT_EQ(overdue.json()["sagas"].size(), 0u) << overdue.body;
  expect_error(call("GET", "/v1/admin/sagas?overdue=maybe", "", op), 400, "invalid_request");

  EXPECT_EQ(call("POST", "/v1/admin/accounts/" + id + "/freeze", "{}", op).status, 200);
  auto frozen = call("GET", "/v1/admin/accounts?status=frozen", "", op);
  ASSERT_EQ(frozen.status, 200) << frozen.body;
  auto listed = [&](const json& page) {
    for (const auto& a : page["accounts"])
      if (a["account_id"] == id) return a;
    return json();
  };
  const auto mine = listed(frozen.json());
  ASSERT_TRUE(mine.is_object()) << frozen.body;
  EXPECT_EQ(mine["status"], "frozen");
  EXPECT_TRUE(mine["shard"].is_number_integer());
  EXPECT_FALSE(mine.contains("tenant"));
  EXPECT_TRUE(listed(call("GET", "/v1/admin/accounts?status=frozen", "", globex_operator_key).json()).is_null());
  EXPECT_EQ(call("POST", "/v1/admin/accounts/" + id + "/unfreeze", "{}", op).status, 200);
  EXPECT_TRUE(listed(call("GET", "/v1/admin/accounts?status=frozen", "", op).json()).is_null());
  expect_error(call("GET", "/v1/admin/accounts", "", op), 400, "invalid_request");

  auto run = call("GET", "/v1/admin/reconciliation?shard=1", "", op);
  ASSERT_EQ(run.status, 200) << run.body;
  auto reports = call("GET", "/v1/admin/reconciliation/reports?shard=1&limit=1", "", op);
  ASSERT_EQ(reports.status, 200) << reports.body;
  ASSERT_EQ(reports.json()["reports"].size(), 1u);
  const auto last = reports.json()["reports"][0];
  EXPECT_EQ(last["report"], run.json());
  EXPECT_EQ(last["shard"], 1);
  EXPECT_EQ(last["differences"], 0);
  EXPECT_EQ(last["classes"], json::object());
  // Another tenant's runs are its own.
  auto theirs = call("GET", "/v1/admin/reconciliation/reports?shard=1", "", globex_operator_key).json()["reports"];
  for (const auto& r : theirs) EXPECT_NE(r["report_id"], last["report_id"]);
  expect_error(call("GET", "/v1/admin/reconciliation/reports?shard=1&limit=101", "", op), 400, "invalid_request");

  // A full audit: 202 at once, its progress read until it completes.
  auto started = call("POST", "/v1/admin/audits?shard=1&freeze=false", "", op);
  ASSERT_EQ(started.status, 202) << started.body;
  const auto audit_id = std::to_string(started.json()["audit_id"].get<std::int64_t>());
  EXPECT_EQ(started.json()["state"], "running");
  EXPECT_FALSE(started.json().contains("tenant"));
  json audit;
  ASSERT_TRUE(eventually(
      [&] {
        audit = call("GET", "/v1/admin/audits/" + audit_id + "?shard=1", "", op).json();
        return audit["state"] == "completed";
      },
      std::chrono::seconds(30)))
      << audit.dump();
  EXPECT_EQ(audit["accounts_checked"], audit["accounts_total"]);
  EXPECT_EQ(audit["differences"], 0) << audit.dump();
  EXPECT_EQ(call("GET", "/v1/admin/audits?shard=1&limit=1", "", op).json()["audits"][0]["audit_id"],
            started.json()["audit_id"]);
  EXPECT_EQ(call("POST", "/v1/admin/audits/" + audit_id + "/cancel?shard=1", "", op).json()["state"], "completed");
  expect_error(call("GET", "/v1/admin/audits/" + audit_id + "?shard=1", "", globex_operator_key), 404, "not_found");
  expect_error(call("POST", "/v1/admin/audits?shard=1&freeze=maybe", "", op), 400, "invalid_request");
  expect_error(call("POST", "/v1/admin/audits?shard=9", "", op), 400, "invalid_request");
  expect_error(call("GET", "/v1/admin/audits/0?shard=1", "", op), 404, "not_found");
  EXPECT_EQ(call("GET", "/v1/admin/audits?shard=1", "", acme_app_key).status, 403);

  auto health = call("GET", "/v1/admin/health", "", op);
  ASSERT_EQ(health.status, 200) << health.body;
  std::set<std::string> ready;
  const auto services = health.json()["services"];
  for (const auto& svc : services)
    if (svc["ready"] == true) ready.insert(svc["name"]);
  EXPECT_EQ(ready, (std::set<std::string>{"gateway", "orchestrator", "shard 0", "shard 1", "relay"})) << health.body;
  for (const char* figure :
       {"sagas_started", "sagas_finished", "upstream_failures", "rate_limited", "relay_lag_seconds"})
    EXPECT_TRUE(health.json()["metrics"][figure].is_number()) << figure << " " << health.body;
  EXPECT_GE(health.json()["metrics"]["sagas_started"], 2);

  for (const char* route : {"/v1/admin/sagas/counts", "/v1/admin/accounts?status=frozen", "/v1/admin/health",
                            "/v1/admin/reconciliation/reports?shard=0"})
    expect_error(call("GET", route), 403, "forbidden");
}

// The console and the OpenAPI file are served without a key.
TEST_F(GatewayApi, TheConsoleAndTheOpenApiFileNeedNoKey) {
  auto page = call("GET", "/console/", "", "");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<html"), std::string::npos);
  auto bare = call("GET", "/console", "", "");
  EXPECT_EQ(bare.status, 301);
  EXPECT_EQ(bare.header("location"), "/console/");
  for (const char* outside : {"/console/../docs/openapi.yaml", "/console/%2e%2e/CMakeLists.txt", "/console/nothing.js"})
    expect_error(call("GET", outside, "", ""), 404, "not_found");
  auto spec = call("GET", "/v1/openapi.yaml", "", "");
  EXPECT_EQ(spec.status, 200);
  EXPECT_EQ(spec.header("content-type"), "application/yaml; charset=utf-8");
  EXPECT_EQ(spec.body.rfind("openapi: 3.1", 0), 0u) << spec.body.substr(0, 80);
}

// A browser offers the key as a subprotocol (it cannot set Authorization).
TEST_F(GatewayApi, TheStreamTakesTheKeyAsASubprotocol) {
  ws_client ws(system_->gateway_port(), "/v1/stream",
               {{"Sec-WebSocket-Protocol", "tally.v1, tally.key.dGVzdC1rZXktYWNtZS1hcHA"}});
  ASSERT_EQ(ws.status(), 101) << ws.refusal();
  EXPECT_EQ(ws.protocol(), "tally.v1");
  const auto id = open_funded(0);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"accounts", {id}}}.dump()));
  post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 7}, {"biz_id", unique_id("c")}});
  bool seen = false;
  for (int i = 0; i < 20 && !seen; ++i) {
    auto f = ws.next();
    if (!f) break;
    auto j = json::parse(*f, nullptr, false);
    seen = j["type"] == "account" && j["account"]["balance"] == 7;
  }
  EXPECT_TRUE(seen);
  ws_client wrong(system_->gateway_port(), "/v1/stream", {{"Sec-WebSocket-Protocol", "tally.v1, tally.key.bm9wZQ"}});
  EXPECT_EQ(wrong.status(), 401);
}

json next_json(ws_client& ws, std::chrono::milliseconds deadline = 5s) {
  auto f = ws.next(deadline);
  return f ? json::parse(*f, nullptr, false) : json();
}

// The next frame that is not a ping.
json next_state(ws_client& ws) {
  for (int i = 0; i < 50; ++i) {
    auto j = next_json(ws);
    if (!j.is_object() || j["type"] != "ping") return j;
  }
  return json();
}

void expect_only_pings(ws_client& ws, std::chrono::milliseconds for_how_long) {
  const auto until = std::chrono::steady_clock::now() + for_how_long;
  while (std::chrono::steady_clock::now() < until) {
    auto f = ws.next(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()));
    if (f) {
      EXPECT_EQ(json::parse(*f)["type"], "ping") << *f;
    }
  }
}

TEST_F(GatewayApi, StreamSendsEveryStateChangeInOrder) {
  const auto id = open_funded(100);
  // Subscribing sends the projection's state: let it catch up first, so the test knows what comes
  // (a read the projection cannot answer yet comes from the shard, which is ahead of it).
  ASSERT_TRUE(eventually([&] {
    auto r = call("GET", "/v1/accounts/" + id);
    return r.header("x-tally-read") == "projection" && r.json()["balance"] == 100;
  }));
  ws_client ws(system_->gateway_port(), "/v1/stream", {{"Authorization", std::string("Bearer ") + acme_app_key}});
  ASSERT_EQ(ws.status(), 101);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"accounts", {id}}}.dump()));
  auto current = next_state(ws);  // the current state first
  EXPECT_EQ(current["type"], "account") << current;
  EXPECT_EQ(current["account"]["balance"], 100) << current;
  std::int64_t version = current["account"]["version"];
  auto held = post("/v1/deductions",
                   {{"account_id", id}, {"amount", 10}, {"biz_id", unique_id("h")}, {"hold_timeout_ms", 60000}});
  const std::string saga = held.json()["saga_id"];
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"sagas", {saga}}}.dump()));
  ASSERT_TRUE(eventually([&] {
    return call("GET", "/v1/sagas/" + saga + "?consistency=strong").json()["state"] == "awaiting_confirmation";
  }));
  call("POST", "/v1/deductions/" + saga + "/confirm?wait_ms=5000", "{}");
  std::vector<std::string> saga_states;
  json last_saga;
  std::int64_t balance = 100;
  for (int i = 0; i < 40 && !(saga_states.size() > 0 && saga_states.back() == "completed" && balance == 90); ++i) {
    auto f = next_state(ws);
    ASSERT_TRUE(f.is_object()) << "no frame; saga states so far: " << json(saga_states);
    if (f["type"] == "account") {
      EXPECT_GT(f["account"]["version"].get<std::int64_t>(), version);
      version = f["account"]["version"];
      balance = f["account"]["balance"];
    } else {
      ASSERT_EQ(f["type"], "saga") << f;
      EXPECT_EQ(f["saga"]["saga_id"], saga);
      EXPECT_NE(f["saga"], last_saga) << "the same state twice";
      last_saga = f["saga"];
      saga_states.push_back(f["saga"]["state"]);
    }
  }
  EXPECT_EQ(balance, 90);
  ASSERT_FALSE(saga_states.empty());
  EXPECT_EQ(saga_states.back(), "completed");
  // No state after completion, and no duplicate: only pings for a second.
  expect_only_pings(ws, 1s);
}

// The relay's pushes: an older version is dropped, a resync (its rebuild
// after a source's failover, which may have lost the newer one) is sent
// whatever came before, and a push it cannot read is refused whole.
TEST_F(GatewayApi, StreamSendsAResyncWhateverVersionCameBefore) {
  const auto id = open_funded(100);
  ws_client ws(system_->gateway_port(), "/v1/stream", {{"Authorization", std::string("Bearer ") + acme_app_key}});
  ASSERT_EQ(ws.status(), 101);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"accounts", {id}}}.dump()));
  ASSERT_TRUE(eventually([&] { return call("GET", "/v1/accounts/" + id).header("x-tally-read") == "projection"; }));
  http_client relay(system_->gateway_internal_port());
  const auto push = [&](std::int64_t version, std::int64_t balance, const json& resync) {
    json body{{"source", "s0"},
              {"events",
               {{{"kind", "account"},
                 {"tenant", "acme"},
                 {"id", id},
                 {"version", version},
                 {"doc", {{"account_id", id}, {"balance", balance}}}}}}};
    if (!resync.is_null()) body["resync"] = resync;
    return relay.call("POST", "/internal/events", body.dump()).status;
  };
  // Past whatever the relay sent so far (the subscription's first state).
  EXPECT_EQ(push(1000, 7, json()), 200);
  for (auto f = next_state(ws); f.is_object() && f["account"]["balance"] != 7; f = next_state(ws))
    ASSERT_EQ(f["type"], "account") << f;
  EXPECT_EQ(push(999, 8, json()), 200);
  EXPECT_EQ(push(999, 9, "yes"), 400);
  EXPECT_EQ(push(999, 10, true), 200);
  const auto resynced = next_state(ws);
  EXPECT_EQ(resynced["account"]["balance"], 10) << resynced << " (8 is an older version, 9 a bad push)";
  expect_only_pings(ws, 500ms);
}

TEST_F(GatewayApi, StreamAnswersBadMessagesAndPings) {
  ws_client ws(system_->gateway_port(), std::string("/v1/stream?api_key=") + acme_app_key);
  ASSERT_EQ(ws.status(), 101);
  for (const char* bad :
       {"{", R"({"op":"dance"})", R"({"op":"subscribe","accounts":["a/b"]})", R"({"op":"subscribe"})"}) {
    ASSERT_TRUE(ws.send(bad));
    auto f = next_state(ws);
    EXPECT_EQ(f["type"], "error") << bad;
    EXPECT_EQ(f["error"]["code"], "invalid_request");
    EXPECT_TRUE(f["error"]["message"].is_string());
  }
  EXPECT_FALSE(ws.closed());
  // Pings keep coming (every 300 ms in this test's configuration).
  auto ping = next_json(ws, 2s);
  EXPECT_EQ(ping["type"], "ping");
  ws_client unauthenticated(system_->gateway_port(), "/v1/stream?api_key=wrong");
  EXPECT_EQ(unauthenticated.status(), 401);
  ws_client none(system_->gateway_port(), "/v1/stream");
  EXPECT_EQ(none.status(), 401);
}

TEST_F(GatewayApi, StreamUpgradesOnlyOnItsOwnPath) {
  const std::map<std::string, std::string> auth{{"Authorization", std::string("Bearer ") + acme_app_key}};
  for (const char* target : {"/v1/sagas", "/v1/stream/x", "/v1/streams", "/", "/healthz", "/v1/admin/sagas"}) {
    ws_client ws(system_->gateway_port(), target, auth);
    EXPECT_EQ(ws.status(), 404) << target;
    const auto j = json::parse(ws.refusal(), nullptr, false);
    ASSERT_TRUE(j.is_object()) << target << ": " << ws.refusal();
    EXPECT_EQ(j["error"]["code"], "not_found") << target;
    EXPECT_TRUE(j["error"]["message"].is_string()) << target;
    EXPECT_TRUE(j["error"]["request_id"].is_string()) << target;
  }
  ws_client encoded(system_->gateway_port(), "/v1/%73tream", auth);  // percent-encoded, the same path
  EXPECT_EQ(encoded.status(), 101);
}

TEST_F(GatewayApi, StreamNeverShowsAnotherTenant) {
  const auto id = open_funded(10);
  ws_client ws(system_->gateway_port(), "/v1/stream", {{"Authorization", std::string("Bearer ") + globex_app_key}});
  ASSERT_EQ(ws.status(), 101);
  ASSERT_TRUE(ws.send(json{{"op", "subscribe"}, {"accounts", {id}}}.dump()));
  post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 1}, {"biz_id", unique_id("c")}});
  expect_only_pings(ws, 1s);
}

// ---------------------------------------------------------------- grant lots (expiring credits)

std::string hours_from_now(int hours) {
  using namespace std::chrono;
  const auto s = duration_cast<seconds>(system_clock::now().time_since_epoch()).count() + hours * 3600;
  return tally::time::rfc3339_ms(s * 1000);
}

TEST_F(GatewayApi, CreditsGrantLotsConsumedFirstToExpireWithTheNextExpiryShown) {
  const auto id = open_funded(0);
  const auto at = hours_from_now(2);
  auto expiring = post("/v1/credits?wait_ms=5000", {{"account_id", id},
                                                    {"amount", 10},
                                                    {"biz_id", unique_id("grant")},
                                                    {"expires_at", at},
                                                    {"rule_version", "promo-7"}});
  ASSERT_EQ(expiring.json()["state"], "completed") << expiring.body;
  EXPECT_EQ(expiring.json()["input"]["expires_at"], at);
  EXPECT_EQ(expiring.json()["input"]["rule_version"], "promo-7");
  ASSERT_EQ(post("/v1/credits?wait_ms=5000", {{"account_id", id}, {"amount", 5}, {"biz_id", unique_id("grant")}})
                .json()["state"],
            "completed");
  auto spent = post("/v1/deductions?wait_ms=5000", {{"account_id", id}, {"amount", 4}, {"biz_id", unique_id("d")}});
  ASSERT_EQ(spent.json()["state"], "completed") << spent.body;

  auto lots = call("GET", "/v1/accounts/" + id + "/lots?state=all");
  ASSERT_EQ(lots.status, 200) << lots.body;
  const auto all = lots.json()["lots"];
  ASSERT_EQ(all.size(), 2u) << lots.body;
  EXPECT_EQ(all[0]["expires_at"], at);
  EXPECT_EQ(all[0]["rule_version"], "promo-7");
  EXPECT_EQ(all[0]["remaining"], 6) << "the expiring lot is spent first";
  EXPECT_TRUE(all[1]["expires_at"].is_null());
  EXPECT_EQ(all[1]["remaining"], 5);
  EXPECT_EQ(account(id)["next_expiry"], (json{{"at", at}, {"amount", 6}}));
  // The projection carries it too, once the relay has delivered.
  EXPECT_TRUE(eventually([&] {
    auto r = call("GET", "/v1/accounts/" + id);
    return r.header("x-tally-read") == "projection" && r.json() == account(id);
  }));
  expect_error(call("GET", "/v1/accounts/" + id + "/lots?state=spent"), 400, "invalid_request");
  expect_error(call("GET", "/v1/accounts/" + unique_id("nobody") + "/lots"), 404, "not_found");
}

TEST_F(GatewayApi, ACreditWithABadOrPastExpiryIsRefusedAndChangesNothing) {
  const auto id = open_funded(0);
  const auto before = ledger(id);
  for (const json& expires : {json("2020-01-01T00:00:00Z"), json(hours_from_now(-1)), json("tomorrow"),
                              json("2030-01-01T00:00:00+01:00"), json("2030-01-01T00:00:00.1234Z"), json(1900000000)}) {
    const auto biz = unique_id("late");
    expect_error(post("/v1/credits", {{"account_id", id}, {"amount", 5}, {"biz_id", biz}, {"expires_at", expires}}),
                 400, "invalid_request");
    EXPECT_EQ(call("GET", "/v1/sagas?type=credit&biz_id=" + biz).json()["sagas"].size(), 0u) << expires;
  }
  EXPECT_EQ(ledger(id), before);
  EXPECT_EQ(call("GET", "/v1/accounts/" + id + "/lots?state=all").json()["lots"].size(), 0u);
}

TEST_F(GatewayApi, ATransferKeepsItsSourcesExpiries) {
  const auto from = open_funded(0), to = open_funded(0);
  const auto soon = hours_from_now(1), later = hours_from_now(3);
  for (const auto& [amount, expires] : {std::pair{10, json(later)}, std::pair{10, json(soon)}, std::pair{10, json()}}) {
    json body{{"account_id", from}, {"amount", amount}, {"biz_id", unique_id("grant")}};
    if (!expires.is_null()) body["expires_at"] = expires;
    ASSERT_EQ(post("/v1/credits?wait_ms=5000", body).json()["state"], "completed");
  }
  auto t = post("/v1/transfers?wait_ms=5000",
                {{"from_account", from}, {"to_account", to}, {"amount", 25}, {"biz_id", unique_id("t")}});
  ASSERT_EQ(t.json()["state"], "completed") << t.body;
  const auto lots = call("GET", "/v1/accounts/" + to + "/lots").json()["lots"];
  ASSERT_EQ(lots.size(), 3u) << lots;
  EXPECT_EQ(lots[0]["expires_at"], soon);
  EXPECT_EQ(lots[0]["remaining"], 10);
  EXPECT_EQ(lots[1]["expires_at"], later);
  EXPECT_EQ(lots[1]["remaining"], 10);
  EXPECT_TRUE(lots[2]["expires_at"].is_null());
  EXPECT_EQ(lots[2]["remaining"], 5);
}

}  // namespace
}  // namespace tally::test
