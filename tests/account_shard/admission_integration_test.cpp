// Hot-account admission on a real shard and PostgreSQL: a burst of
// concurrent debits on one account, with a small maximum wait, gets
// account_busy refusals (429 with Retry-After on /v1/commands, per item in
// /v1/batch) while concurrent writes on other accounts all succeed; a
// refusal changes nothing (no operation, no ledger entry, the balance moved
// by exactly the accepted debits) and its key resent later succeeds.
#include <gtest/gtest.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/account_shard/shard_fixture.hpp"

namespace tally::test {
namespace {

constexpr std::int64_t hot_opening = 1'000'000;
constexpr std::int64_t cold_opening = 1'000;

// The refused and accepted keys of the hot account, from every thread.
struct tally_of_keys {
  std::mutex m;
  std::vector<std::string> refused, accepted;
  std::vector<std::string> problems;  // anything else: the test fails with it
  void add(std::vector<std::string>& to, std::string key) {
    std::lock_guard l(m);
    to.push_back(std::move(key));
  }
};

std::string quoted_list(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "'" : ",'") + id + "'";
  return out;
}

class AdmissionTest : public ShardTest {
 protected:
  void SetUp() override {
    ShardTest::SetUp();
    // 1 ms of safe wait and small batches: a burst of a few hundred debits on one
    // account needs many batches one after another, far more than 1 ms.
    restart({"--admission.max_wait_ms=1", "--commit.max_batch=8"});
  }
  json status() {
    auto r = client_->call("GET", "/v1/status");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }
  std::int64_t rows_for(const std::string& table, const std::vector<std::string>& keys) {
    return query_int(
        db_, "SELECT count(*) FROM " + table + " WHERE account_id = 'hot' AND biz_id IN (" + quoted_list(keys) + ")");
  }
};

TEST_F(AdmissionTest, ABurstOnOneAccountIsRefusedBusyWhileOtherAccountsAreUntouched) {
  open("hot", hot_opening);
  constexpr int colds = 6, cold_debits = 10;
  for (int i = 0; i < colds; ++i) open("cold" + std::to_string(i), cold_opening);
  // The shard now knows what a batch takes (the estimate needs measured batches).
  ASSERT_GT(status()["admission"]["expected_batch_ms"].get<double>(), 0.0);

  tally_of_keys hot;
  std::atomic<bool> go{false};
  std::atomic<int> cold_failures{0};
  std::vector<std::thread> threads;
  // One request with 200 debits on the hot account: per-item results.
  threads.emplace_back([&] {
    http_client c(port_);
    json batch{{"commands", json::array()}};
    for (int i = 0; i < 200; ++i) batch["commands"].push_back(command("debit", "hot", "b-" + std::to_string(i), 1));
    while (!go) std::this_thread::yield();
    auto r = c.call("POST", "/v1/batch", batch.dump());
    if (r.status != 200) return hot.add(hot.problems, "batch: " + std::to_string(r.status) + " " + r.body);
    auto results = r.json()["results"];
    for (int i = 0; i < 200; ++i) {
      const auto& item = results[static_cast<std::size_t>(i)];
      const auto key = "b-" + std::to_string(i);
      if (item["status"] == "succeeded")
        hot.add(hot.accepted, key);
      else if (item["status"] == "unavailable" && item["code"] == "account_busy" && item["retry_after_ms"] >= 1)
        hot.add(hot.refused, key);
      else
        hot.add(hot.problems, key + ": " + item.dump());
    }
  });
  // 16 clients, 6 single debits each, on the hot account: 200 or 429.
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      http_client c(port_);
      while (!go) std::this_thread::yield();
      for (int i = 0; i < 6; ++i) {
        const auto key = "s-" + std::to_string(t) + "-" + std::to_string(i);
        auto r = c.call("POST", "/v1/commands", command("debit", "hot", key, 1).dump());
        const auto body = r.json();
        if (r.status == 200 && body["status"] == "succeeded") {
          hot.add(hot.accepted, key);
          continue;
        }
        std::int64_t after = 0;
        const auto h = r.header("retry-after");
        const bool whole_seconds =
            std::from_chars(h.data(), h.data() + h.size(), after).ec == std::errc() && after >= 1;
        if (r.status == 429 && body["error"]["code"] == "account_busy" && whole_seconds &&
            body["error"].contains("request_id"))
          hot.add(hot.refused, key);
        else
          hot.add(hot.problems, key + ": " + std::to_string(r.status) + " " + r.body + " Retry-After " + h);
      }
    });
  // Every other account, written concurrently one debit at a time: never refused.
  for (int a = 0; a < colds; ++a)
    threads.emplace_back([&, a] {
      http_client c(port_);
      while (!go) std::this_thread::yield();
      for (int i = 0; i < cold_debits; ++i) {
        auto r = c.call("POST", "/v1/commands",
                        command("debit", "cold" + std::to_string(a), "c-" + std::to_string(i), 1).dump());
        if (r.status != 200 || r.json()["status"] != "succeeded") {
          ++cold_failures;
          ADD_FAILURE() << "cold" << a << " debit " << i << ": " << r.status << " " << r.body;
        }
      }
    });
  go = true;
  for (auto& t : threads) t.join();

  std::printf("hot account: %zu debits accepted, %zu refused account_busy\n", hot.accepted.size(), hot.refused.size());
  ASSERT_TRUE(hot.problems.empty()) << hot.problems.front();
  EXPECT_EQ(cold_failures, 0);
  ASSERT_EQ(hot.refused.size() + hot.accepted.size(), 296u);
  EXPECT_GT(hot.refused.size(), 0u) << "a burst of 296 debits on one account with 1 ms of safe wait";
  EXPECT_GT(hot.accepted.size(), 0u);
  for (int a = 0; a < colds; ++a) EXPECT_EQ(balance("cold" + std::to_string(a)), cold_opening - cold_debits);

  // Refused: nothing of them anywhere; the balance moved by exactly the accepted debits.
  EXPECT_EQ(rows_for("operation", hot.refused), 0);
  EXPECT_EQ(rows_for("ledger_entry", hot.refused), 0);
  EXPECT_EQ(rows_for("operation", hot.accepted), static_cast<std::int64_t>(hot.accepted.size()));
  EXPECT_EQ(rows_for("ledger_entry", hot.accepted), static_cast<std::int64_t>(hot.accepted.size()));
  EXPECT_EQ(balance("hot"), hot_opening - static_cast<std::int64_t>(hot.accepted.size()));

  // Operators see every refusal.
  const auto adm = status()["admission"];
  EXPECT_EQ(adm["refused_on_arrival"].get<std::int64_t>() + adm["refused_at_start"].get<std::int64_t>(),
            static_cast<std::int64_t>(hot.refused.size()))
      << adm.dump();
  EXPECT_EQ(adm["max_wait_ms"], 1.0);
  const auto metrics = client_->call("GET", "/metrics", "", "").body;
  EXPECT_NE(metrics.find("tally_shard_account_busy_total{at=\"arrival\"}"), std::string::npos);
  EXPECT_NE(metrics.find("tally_shard_account_wait_seconds_count"), std::string::npos);

  // A refused key, resent when the account is quiet, is decided as if it were new.
  for (const auto& key : hot.refused) {
    auto r = send(command("debit", "hot", key, 1));
    EXPECT_EQ(r["status"], "succeeded") << key << ": " << r.dump();
    EXPECT_EQ(r["replayed"], false) << key;
  }
  EXPECT_EQ(rows_for("ledger_entry", hot.refused), static_cast<std::int64_t>(hot.refused.size()));
  EXPECT_EQ(balance("hot"), hot_opening - 296);
}

TEST_F(AdmissionTest, ZeroMaximumWaitQueuesEveryCommand) {
  restart({"--admission.max_wait_ms=0", "--commit.max_batch=8"});
  open("hot", hot_opening);
  json batch{{"commands", json::array()}};
  for (int i = 0; i < 400; ++i) batch["commands"].push_back(command("debit", "hot", "z-" + std::to_string(i), 1));
  auto r = client_->call("POST", "/v1/batch", batch.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const auto answered = r.json();  // range-for over a temporary's member would dangle
  for (const auto& item : answered["results"]) ASSERT_EQ(item["status"], "succeeded") << item.dump();
  EXPECT_EQ(balance("hot"), hot_opening - 400);
  EXPECT_EQ(status()["admission"]["refused_on_arrival"], 0);
}

}  // namespace
}  // namespace tally::test
