// The gateway's pure parts: API keys, token buckets, request checks and the
// WebSocket protocol.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "gateway/api/requests.hpp"
#include "gateway/auth/api_keys.hpp"
#include "gateway/limit/token_bucket.hpp"
#include "gateway/service/clusters.hpp"
#include "gateway/service/hot_accounts.hpp"
#include "gateway/stream/messages.hpp"

namespace tally::gateway {
namespace {

api_keys keys_of(const std::string& spec) {
  auto r = api_keys::parse(spec);
  if (auto* e = std::get_if<std::string>(&r)) ADD_FAILURE() << *e;
  return std::get<api_keys>(r);
}

std::string refused_keys(const std::string& spec) {
  auto r = api_keys::parse(spec);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "accepted";
}

TEST(ApiKeys, AuthenticateByHashToTenantAndRole) {
  const auto keys =
      keys_of("acme:app:" + digest::sha256_hex("key-a") + ";acme:operator:" + digest::sha256_hex("key-o") +
              ";other:app:" + digest::sha256_hex("key-x"));
  auto a = keys.authenticate("key-a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tenant, "acme");
  EXPECT_EQ(a->r, role::app);
  EXPECT_EQ(a->key_id, digest::sha256_hex("key-a").substr(0, 12));
  auto o = keys.authenticate("key-o");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->r, role::op);
  EXPECT_EQ(keys.authenticate("key-x")->tenant, "other");
  EXPECT_FALSE(keys.authenticate("key-b"));
  EXPECT_FALSE(keys.authenticate(""));
  // The hash itself is not a key.
  EXPECT_FALSE(keys.authenticate(digest::sha256_hex("key-a")));
}

TEST(ApiKeys, RefuseBadConfiguration) {
  const auto h = digest::sha256_hex("k");
  EXPECT_EQ(refused_keys(""), "no api keys configured");
  EXPECT_EQ(refused_keys("acme:app"), "api key entries are tenant:role:sha256hex, got one with 8 characters");
  EXPECT_EQ(refused_keys("acme:admin:" + h), "api key role must be app or operator");
  EXPECT_EQ(refused_keys("acme:app:" + h.substr(1)),
            "api key hash must be 64 lowercase hex digits (SHA-256 of the key)");
  EXPECT_EQ(refused_keys("a/b:app:" + h), "api key entry with a bad tenant id");
  EXPECT_EQ(refused_keys("a:app:" + h + ";b:app:" + h), "the same api key hash is configured twice");
}

TEST(ApiKeys, OnlyOperatorsUseAdminRoutes) {
  EXPECT_TRUE(may_use(role::app, false));
  EXPECT_FALSE(may_use(role::app, true));
  EXPECT_TRUE(may_use(role::op, true));
  EXPECT_TRUE(may_use(role::op, false));
}

TEST(TokenBucket, StartsFullRefillsAndRefuses) {
  const bucket_limit limit{10, 3};
  bucket_state s;
  EXPECT_TRUE(take(s, limit, 1000).allowed);
  EXPECT_TRUE(take(s, limit, 1000).allowed);
  EXPECT_TRUE(take(s, limit, 1000).allowed);
  auto refused = take(s, limit, 1000);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_ms, 100);  // one token at 10/s
  EXPECT_FALSE(take(s, limit, 1050).allowed);
  EXPECT_TRUE(take(s, limit, 1100).allowed);
  // Never more than the burst, however long it was idle.
  bucket_state idle;
  take(idle, limit, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(take(idle, limit, 1'000'000).allowed);
  EXPECT_FALSE(take(idle, limit, 1'000'000).allowed);
  // A clock going backwards takes no tokens and adds none.
  EXPECT_FALSE(take(idle, limit, 999'000).allowed);
}

TEST(TokenBucket, RetryAfterIsWholeSecondsRoundedUp) {
  EXPECT_EQ(retry_after_seconds(0), 1);
  EXPECT_EQ(retry_after_seconds(1), 1);
  EXPECT_EQ(retry_after_seconds(1000), 1);
  EXPECT_EQ(retry_after_seconds(1001), 2);
}

TEST(UpstreamAnswers, AnAccountBusyFromAnyUpstreamIs429WithWholeSecondsAtLeastOne) {
  const std::string busy = R"({"error":{"code":"account_busy","message":"m","request_id":"r"}})";
  EXPECT_EQ(account_busy_retry_after(429, busy, "3"), 3);
  EXPECT_EQ(account_busy_retry_after(429, busy, ""), 1);
  for (const char* unusable : {"0", "-2", "1.5", "soon", "2 "})
    EXPECT_EQ(account_busy_retry_after(429, busy, unusable), 1);
  EXPECT_EQ(account_busy_retry_after(503, busy, ""), 1);  // whatever status the upstream chose
  EXPECT_FALSE(account_busy_retry_after(429, R"({"error":{"code":"rate_limited"}})", "2"));
  EXPECT_FALSE(account_busy_retry_after(503, R"({"error":{"code":"unavailable"}})", ""));
  EXPECT_FALSE(account_busy_retry_after(200, R"({"status":"succeeded","code":"account_busy"})", ""));
  EXPECT_FALSE(account_busy_retry_after(429, "not json", "1"));
  EXPECT_FALSE(account_busy_retry_after(429, R"({"error":"account_busy"})", "1"));
}

TEST(UpstreamAnswers, AnOperatorSeesOnlyItsOwnTenantsHotAccounts) {
  auto status = nlohmann::json::parse(R"({"leader": true, "admission": {"max_wait_ms": 20, "hottest": [
      {"tenant": "acme", "account_id": "a1", "queued": 9, "batch_running_ms": 3.5},
      {"tenant": "other", "account_id": "o1", "queued": 7, "batch_running_ms": null},
      {"tenant": "acme", "account_id": "a2", "queued": 2, "batch_running_ms": null}]}})");
  keep_own_hot_accounts(status, "acme");
  EXPECT_EQ(status["admission"]["hottest"], nlohmann::json::parse(R"([
      {"account_id": "a1", "queued": 9, "batch_running_ms": 3.5},
      {"account_id": "a2", "queued": 2, "batch_running_ms": null}])"));
  EXPECT_EQ(status["admission"]["max_wait_ms"], 20);
  keep_own_hot_accounts(status, "nobody");
  EXPECT_TRUE(status["admission"]["hottest"].empty());
  auto without = nlohmann::json::parse(R"({"leader": true})");
  keep_own_hot_accounts(without, "acme");  // a shard from before admission: unchanged
  EXPECT_EQ(without, nlohmann::json::parse(R"({"leader": true})"));
}

TEST(LocalLimiter, TakesAllOrNothing) {
  local_limiter l;
  const std::vector<bucket_ref> both{{"key", {100, 5}}, {"hot", {1, 1}}};
  EXPECT_TRUE(l.take_all(both, 0).result.allowed);
  auto refused = l.take_all(both, 0);
  EXPECT_FALSE(refused.result.allowed);
  EXPECT_EQ(refused.refused, 1u);
  EXPECT_EQ(refused.result.retry_after_ms, 1000);
  // The refused request took nothing from the key's bucket: 4 are left.
  const std::vector<bucket_ref> key_only{{"key", {100, 5}}};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(l.take_all(key_only, 0).result.allowed);
  EXPECT_FALSE(l.take_all(key_only, 0).result.allowed);
}

std::string refused_write(write_kind k, const std::string& body) {
  auto r = check_write(k, "acme", body);
  return std::holds_alternative<refusal>(r) ? std::get<refusal>(r).message : "accepted";
}

TEST(Requests, WritesNameTheirAccounts) {
  auto t =
      check_write(write_kind::transfer, "acme", R"({"from_account":"a","to_account":"b","amount":5,"biz_id":"t1"})");
  ASSERT_TRUE(std::holds_alternative<accepted_write>(t));
  EXPECT_EQ(std::get<accepted_write>(t).accounts, (std::vector<std::string>{"a", "b"}));
  auto b = check_write(write_kind::batch_deduct, "acme",
                       R"({"biz_id":"c1","items":[{"account_id":"x","amount":1},{"account_id":"y","amount":2}]})");
  ASSERT_TRUE(std::holds_alternative<accepted_write>(b));
  EXPECT_EQ(std::get<accepted_write>(b).accounts, (std::vector<std::string>{"x", "y"}));
  auto o = check_write(write_kind::open_account, "acme", R"({"account_id":"alice"})");
  ASSERT_TRUE(std::holds_alternative<accepted_write>(o));
  EXPECT_EQ(std::get<accepted_write>(o).account_id, "alice");
}

TEST(Requests, ASagaWriteIsValidatedOnceIntoTheContractsRequest) {
  auto t = check_write(write_kind::transfer, "acme",
                       R"({"from_account":"a","to_account":"b","amount":5,"biz_id":"t1","timeout_ms":900})");
  ASSERT_TRUE(std::holds_alternative<accepted_write>(t));
  const auto& saga = std::get<accepted_write>(t).saga;
  ASSERT_TRUE(saga);
  EXPECT_EQ(saga->type, contract::saga_type::transfer);
  EXPECT_EQ(saga->tenant, "acme");
  EXPECT_EQ(saga->source, "a");
  EXPECT_EQ(saga->destination, "b");
  EXPECT_EQ(saga->timeout, std::chrono::milliseconds(900));
  EXPECT_EQ(saga->request_hash.size(), 64u);
  auto o = check_write(write_kind::open_account, "acme", R"({"account_id":"alice"})");
  ASSERT_TRUE(std::holds_alternative<accepted_write>(o));
  EXPECT_FALSE(std::get<accepted_write>(o).saga);
  EXPECT_EQ(write_of_collection("accounts"), write_kind::open_account);
  EXPECT_EQ(write_of_collection("credits"), write_kind::credit);
  EXPECT_EQ(write_of_collection("batch-deductions"), write_kind::batch_deduct);
  EXPECT_FALSE(write_of_collection("batch_deduct"));
  EXPECT_FALSE(write_of_collection("sagas"));
}

TEST(Requests, BadWritesAreRefusedWithTheReason) {
  EXPECT_EQ(refused_write(write_kind::credit, R"({"account_id":"a","amount":5)"), "malformed JSON");
  EXPECT_EQ(refused_write(write_kind::credit, "[1]"), "the body must be a JSON object");
  EXPECT_NE(refused_write(write_kind::credit, R"({"account_id":"a","amount":"5","biz_id":"c"})"), "accepted");
  EXPECT_NE(refused_write(write_kind::credit, R"({"account_id":"a","amount":1000000000000001,"biz_id":"c"})"),
            "accepted");
  EXPECT_NE(refused_write(write_kind::credit, R"({"account_id":"a b","amount":5,"biz_id":"c"})"), "accepted");
  EXPECT_NE(refused_write(write_kind::transfer, R"({"from_account":"a","to_account":"a","amount":5,"biz_id":"t"})"),
            "accepted");
  EXPECT_EQ(refused_write(write_kind::open_account, R"({"account_id":"a","extra":1})"), "unknown field extra");
  // Found by the fuzz target: a field named "" once passed as no unknown field at all.
  EXPECT_NE(refused_write(write_kind::transfer, R"({"from_account":"","to_accountfromnt":"","":"","t/":"t"})"),
            "accepted");
  EXPECT_NE(refused_write(write_kind::credit, R"({"":1})"), "accepted");
  EXPECT_NE(refused_write(write_kind::open_account, R"({})"), "accepted");
}

TEST(Requests, QueryParametersInRange) {
  auto ok = check_query("wait_ms=30000&limit=500&after=7&consistency=strong");
  ASSERT_TRUE(std::holds_alternative<read_params>(ok));
  const auto& p = std::get<read_params>(ok);
  EXPECT_EQ(p.wait_ms, 30000);
  EXPECT_EQ(p.limit, 500);
  EXPECT_EQ(p.after, 7);
  EXPECT_TRUE(p.strong);
  for (const char* bad : {"wait_ms=30001", "wait_ms=-1", "wait_ms=x", "limit=0", "limit=501", "after=-1",
                          "consistency=weak", "wait_ms=99999999999999999999"})
    EXPECT_TRUE(std::holds_alternative<refusal>(check_query(bad))) << bad;
}

TEST(StreamMessages, SubscribeAndUnsubscribe) {
  auto s = parse_client_message(R"({"op":"subscribe","sagas":["sg_01M8SK5P59QN4B6C63QRHYZM3T"],"accounts":["alice"]})");
  ASSERT_TRUE(std::holds_alternative<subscription_change>(s)) << std::get<bad_message>(s).message;
  EXPECT_TRUE(std::get<subscription_change>(s).subscribe);
  EXPECT_EQ(std::get<subscription_change>(s).accounts, std::vector<std::string>{"alice"});
  auto u = parse_client_message(R"({"op":"unsubscribe","accounts":["alice"]})");
  ASSERT_TRUE(std::holds_alternative<subscription_change>(u));
  EXPECT_FALSE(std::get<subscription_change>(u).subscribe);
}

TEST(StreamMessages, BadMessagesAreExplained) {
  auto reason = [](std::string_view text) {
    auto r = parse_client_message(text);
    return std::holds_alternative<bad_message>(r) ? std::get<bad_message>(r).message : "accepted";
  };
  EXPECT_EQ(reason("{"), "malformed JSON");
  EXPECT_EQ(reason("[]"), "a message is a JSON object");
  EXPECT_EQ(reason(R"({"accounts":["a"]})"), "op is required: subscribe or unsubscribe");
  EXPECT_EQ(reason(R"({"op":"listen","accounts":["a"]})"), "op must be subscribe or unsubscribe");
  EXPECT_EQ(reason(R"({"op":"subscribe"})"), "name at least one saga or account");
  EXPECT_EQ(reason(R"({"op":"subscribe","accounts":"a"})"), "accounts must be an array of ids");
  EXPECT_EQ(reason(R"({"op":"subscribe","accounts":["a/b"]})"), "bad id in accounts");
  EXPECT_EQ(reason(R"({"op":"subscribe","sagas":["alice"]})"), "bad id in sagas");
  EXPECT_EQ(reason(R"({"op":"subscribe","accounts":["a"],"x":1})"), "unknown field x");
}

TEST(StreamMessages, FramesAndTopics) {
  EXPECT_EQ(state_frame(true, R"({"saga_id":"s"})"), R"({"type":"saga","saga":{"saga_id":"s"}})");
  EXPECT_EQ(state_frame(false, R"({"balance":1})"), R"({"type":"account","account":{"balance":1}})");
  EXPECT_EQ(ping_frame(), R"({"type":"ping"})");
  EXPECT_EQ(error_frame("invalid_request", "x"),
            R"({"error":{"code":"invalid_request","message":"x"},"type":"error"})");
  // Tenants never share a topic, even with ':' in ids.
  EXPECT_NE(account_topic("a:b", "c"), account_topic("a", "b:c"));
  EXPECT_NE(account_topic("t", "x"), saga_topic("t", "x"));
}

// The monitor's rows as operators see them: per formation its primary,
// whether it takes writes (wait_primary does not), its healthy synchronous
// standbys, its last failover.
TEST(ClustersView, FormationsFromTheMonitorsRows) {
  const auto node = [](std::string formation, std::string name, std::string state, std::string goal) {
    monitor_node n;
    n.formation = std::move(formation);
    n.name = std::move(name);
    n.state = std::move(state);
    n.goal = std::move(goal);
    n.health = 1;
    n.synchronous = true;
    return n;
  };
  std::vector<monitor_node> rows{
      node("a", "a1", "primary", "primary"),      node("a", "a2", "secondary", "secondary"),
      node("a", "a3", "secondary", "secondary"),  node("b", "b1", "wait_primary", "wait_primary"),
      node("b", "b2", "catchingup", "secondary"), node("b", "b3", "secondary", "secondary")};
  rows[2].health = 0;  // down: not counted
  rows[2].lag_bytes = 4096;
  for (auto* r : {&rows[0], &rows[1], &rows[2]}) {
    r->since_failover_ms = 75'500;
    r->failover_node = "a1";
    r->failovers = 2;
  }
  const auto view = clusters_view(rows);
  ASSERT_EQ(view["formations"].size(), 2u);
  const auto& a = view["formations"][0];
  EXPECT_EQ(a["primary"], "a1");
  EXPECT_EQ(a["writable"], true);
  EXPECT_EQ(a["synchronous_standbys"], 1);
  EXPECT_EQ(a["failovers"], 2);
  EXPECT_EQ(a["last_failover"], (nlohmann::json{{"node", "a1"}, {"seconds_ago", 75}}));
  ASSERT_EQ(a["nodes"].size(), 3u);
  EXPECT_EQ(a["nodes"][2]["health"], "bad");
  EXPECT_EQ(a["nodes"][2]["lag_bytes"], 4096);
  const auto& b = view["formations"][1];
  EXPECT_EQ(b["primary"], "b1");
  EXPECT_EQ(b["writable"], false) << "wait_primary writes on one copy: the services refuse";
  EXPECT_EQ(b["synchronous_standbys"], 1) << "a node still catching up does not count";
  EXPECT_TRUE(b["last_failover"].is_null());
  // A failover under way: nobody reports and is assigned primary.
  rows[0].goal = "draining";
  EXPECT_TRUE(clusters_view(rows)["formations"][0]["primary"].is_null());
  EXPECT_TRUE(clusters_view({})["formations"].empty());
}

TEST(VersionFilter, EachVersionOnceAndInOrder) {
  version_filter f;
  EXPECT_TRUE(f.admit("a", 3));
  EXPECT_FALSE(f.admit("a", 3));
  EXPECT_FALSE(f.admit("a", 2));
  EXPECT_TRUE(f.admit("a", 5));
  EXPECT_TRUE(f.admit("b", 1));
  f.forget("a");
  EXPECT_TRUE(f.admit("a", 1));
  // A resync goes whatever was sent; later versions count from it.
  EXPECT_TRUE(f.admit("b", 1, true));
  EXPECT_TRUE(f.admit("b", 0, true));
  EXPECT_FALSE(f.admit("b", 0));
  EXPECT_TRUE(f.admit("b", 1));
}

}  // namespace
}  // namespace tally::gateway
