// A random workload through the orchestrator: sagas of every type from 16
// concurrent clients over 120 accounts on two shards, a hot account in a
// third of them, then the checker of every promise across the shards and
// the saga store. TALLY_WORKLOAD_SAGAS sets the size (default 5,000).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "tests/orchestrator/cluster.hpp"

namespace tally::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

int workload_size() {
  const char* v = std::getenv("TALLY_WORKLOAD_SAGAS");
  return v ? std::max(1, std::atoi(v)) : 5000;
}

TEST(OrchestratorWorkload, RandomSagasOfEveryTypeKeepEveryPromise) {
  cluster c;
  constexpr int accounts = 120, clients = 16;
  const std::string hot = "acc-0";
  for (int i = 0; i < accounts; ++i) c.open("acc-" + std::to_string(i), 1000);
  auto& orch = c.start_orchestrator();
  const int total = workload_size();
  std::atomic<int> next{0}, errors{0};
  std::mutex originals_mutex;
  std::vector<std::string> originals;  // completed deductions and transfers, to refund
  std::map<std::string, int> by_type;
  std::mutex types_mutex;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1);
      auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      auto account = [&] { return "acc-" + std::to_string(pick(1, accounts - 1)); };
      http_client api(orch.port());
      for (int n = next++; n < total; n = next++) {
        const bool use_hot = n % 3 == 0;
        const auto biz = "w-" + std::to_string(n);
        const int kind = pick(0, 9);
        std::string collection, type;
        json body{{"biz_id", biz}};
        auto first = use_hot ? hot : account();
        if (kind <= 3) {
          auto second = account();
          while (second == first) second = account();
          collection = "transfers", type = "transfer";
          if (pick(0, 1)) std::swap(first, second);
          body.update({{"from_account", first}, {"to_account", second}, {"amount", pick(1, 60)}});
        } else if (kind == 4) {
          collection = "credits", type = "credit";
          body.update({{"account_id", first}, {"amount", pick(1, 50)}});
        } else if (kind == 5) {
          collection = "deductions", type = "deduct";
          body.update({{"account_id", first}, {"amount", pick(1, 80)}});
        } else if (kind == 6) {
          collection = "deductions", type = "deduct_held";
          body.update({{"account_id", first}, {"amount", pick(1, 40)}, {"hold_timeout_ms", pick(200, 3000)}});
        } else if (kind == 7) {
          collection = "batch-deductions", type = "batch_deduct";
          json items = json::array();
          std::set<std::string> used{first};
          items.push_back({{"account_id", first}, {"amount", pick(1, 20)}});
          for (int k = pick(1, 5); k > 0; --k) {
            auto a = account();
            if (used.insert(a).second) items.push_back({{"account_id", a}, {"amount", pick(1, 20)}});
          }
          body["items"] = std::move(items);
        } else {
          std::string original;
          {
            std::lock_guard lock(originals_mutex);
            if (!originals.empty())
              original = originals[static_cast<std::size_t>(pick(0, static_cast<int>(originals.size()) - 1))];
          }
          if (original.empty()) {
            collection = "credits", type = "credit";
            body.update({{"account_id", first}, {"amount", 1}});
          } else {
            collection = "refunds", type = "refund";
            body.update({{"original_saga_id", original}, {"amount", pick(1, 40)}});
          }
        }
        auto r = post_saga(api, collection, body, 10000);
        if (r.status != 200 && r.status != 202) {
          ++errors;
          ADD_FAILURE() << collection << " " << body.dump() << " -> " << r.status << " " << r.body;
          continue;
        }
        auto saga = r.json();
        if (type == "deduct_held" && saga["state"] == "awaiting_confirmation" && pick(0, 2) > 0) {
          const auto action = pick(0, 1) ? "/confirm" : "/cancel";
          // The hold may time out first: then 409 is the right answer.
          auto a = api.call("POST", "/v1/tenants/t1/deductions/" + saga["saga_id"].get<std::string>() + action, "{}");
          EXPECT_TRUE(a.status == 200 || a.status == 409) << a.body;
        }
        if (saga["state"] == "completed" && (type == "deduct" || type == "transfer")) {
          std::lock_guard lock(originals_mutex);
          originals.push_back(saga["saga_id"]);
        }
        std::lock_guard lock(types_mutex);
        by_type[type + " " + saga["state"].get<std::string>()]++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(c.sagas(), total);
  EXPECT_TRUE(eventually([&] { return c.sagas("state NOT IN ('completed', 'failed', 'compensated')") == 0; }, 30s))
      << orch.log_path();
  auto problems = c.check_promises();
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  // The mix really happened: every type, successes and failures.
  for (const auto& [k, v] : by_type) std::printf("  %-36s %d\n", k.c_str(), v);
  EXPECT_GT(c.sagas("type = 'refund'"), 0);
  EXPECT_GT(c.sagas("state = 'failed'"), 0);
  EXPECT_GT(c.sagas("state = 'compensated'"), 0);
  EXPECT_GT(c.sagas("type = 'batch_deduct' AND state = 'completed'"), 0);
}

}  // namespace
}  // namespace tally::test
