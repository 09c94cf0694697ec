// Crashes at every failpoint of the commit path under load, standby
// takeover under load, and fencing of a paused old writer — each followed by
// resending every key whose outcome the clients did not learn, and a check
// of every promise.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "tests/account_shard/shard_checker.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json debit_or_credit(int client, int i) {
  std::string account = i % 3 == 0 ? "hot" : "a" + std::to_string((client * 7 + i) % 20);
  json c = {{"type", i % 4 == 0 ? "credit" : "debit"},
            {"tenant", "t1"},
            {"account_id", account},
            {"biz_id", "c" + std::to_string(client) + "-" + std::to_string(i)},
            {"amount", 1 + (i * 13) % 40}};
  return c;
}

// Drives load from several clients until each has sent its commands,
// remembering what was acknowledged and what is unknown.
class load {
 public:
  load(std::uint16_t port, int clients, int per_client) : port_(port), clients_(clients), per_client_(per_client) {}
  void start() {
    for (int t = 0; t < clients_; ++t)
      threads_.emplace_back([this, t] {
        http_client c(port_);
        for (int i = 0; i < per_client_ && !stop_; ++i) {
          json cmd = debit_or_credit(t, i);
          auto r = c.call("POST", "/v1/commands", cmd.dump());
          std::lock_guard lock(mu_);
          if (r.status == 200) {
            acknowledged_[cmd["biz_id"]] = r.json();
          } else {
            unknown_.push_back(cmd);  // lost reply or shard down: resend the same key later
            if (r.status == 0) {
              struct timespec ts {
                0, 20'000'000
              };
              nanosleep(&ts, nullptr);
            }
          }
          sent_.push_back(cmd);
        }
      });
  }
  void join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void stop() { stop_ = true; }
  std::size_t acknowledged() {
    std::lock_guard lock(mu_);
    return acknowledged_.size();
  }
  // Resends every unknown key until decided; checks that every earlier
  // acknowledgement is what the shard stored.
  void resolve(std::uint16_t port) {
    http_client c(port);
    for (const auto& cmd : unknown_) {
      http_reply r;
      ASSERT_TRUE(eventually([&] { return (r = c.call("POST", "/v1/commands", cmd.dump())).status == 200; }, 10s))
          << cmd.dump();
      acknowledged_[cmd["biz_id"]] = r.json();
    }
    for (const auto& cmd : sent_) {
      auto r = c.call("POST", "/v1/commands", cmd.dump()).json();
      auto first = acknowledged_[cmd["biz_id"]];
      EXPECT_EQ(r["status"], first["status"]) << cmd.dump();
      EXPECT_EQ(r["amount"], first["amount"]) << cmd.dump();
      EXPECT_EQ(r["ledger_seq"], first["ledger_seq"]) << cmd.dump();
    }
  }
  std::size_t unknown() const { return unknown_.size(); }

 private:
  std::uint16_t port_;
  int clients_, per_client_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<std::string, json> acknowledged_;
  std::vector<json> unknown_, sent_;
};

void seed(std::uint16_t port) {
  http_client c(port);
  json batch = {{"commands", json::array()}};
  for (int i = 0; i < 20; ++i) {
    std::string a = "a" + std::to_string(i);
    batch["commands"].push_back({{"type", "open_account"}, {"tenant", "t1"}, {"account_id", a}});
    batch["commands"].push_back(
        {{"type", "credit"}, {"tenant", "t1"}, {"account_id", a}, {"biz_id", "seed"}, {"amount", 500}});
  }
  batch["commands"].push_back({{"type", "open_account"}, {"tenant", "t1"}, {"account_id", "hot"}});
  batch["commands"].push_back(
      {{"type", "credit"}, {"tenant", "t1"}, {"account_id", "hot"}, {"biz_id", "seed"}, {"amount", 2000}});
  ASSERT_EQ(c.call("POST", "/v1/batch", batch.dump()).status, 200);
}

// Starts the writer, waits until it serves, and opens the funded accounts.
void start_seeded(shard_process& writer) {
  writer.start();
  ASSERT_TRUE(writer.wait_ready()) << writer.log_path();
  seed(writer.port());
}

class FailpointCrash : public ::testing::TestWithParam<std::string> {};

TEST_P(FailpointCrash, KilledUnderLoadThenRestartedKeepsEveryPromise) {
  auto db = create_database("shard_fp");
  auto port = free_port();
  {
    shard_process warm(db, port);
    ASSERT_NO_FATAL_FAILURE(start_seeded(warm));
    warm.terminate();
    ASSERT_EQ(warm.wait_exit(), 0);
  }
  shard_process doomed(db, port, {}, {{"TALLY_FAILPOINTS", GetParam() + "=crash@40"}});
  doomed.start();
  ASSERT_TRUE(doomed.wait_ready()) << doomed.log_path();
  load l(port, 6, 150);
  l.start();
  EXPECT_EQ(doomed.wait_exit(30s), 137) << "the failpoint must kill the shard: " << doomed.log_path();
  shard_process revived(db, port);
  revived.start();
  ASSERT_TRUE(revived.wait_ready()) << revived.log_path();
  l.join();
  EXPECT_GT(l.unknown(), 0u) << "the crash should leave some outcomes unknown";
  l.resolve(port);
  auto v = check_shard_promises(db);
  EXPECT_TRUE(v.empty()) << v.front();
  revived.terminate();
  EXPECT_EQ(revived.wait_exit(), 0);
}

INSTANTIATE_TEST_SUITE_P(CommitPath, FailpointCrash,
                         ::testing::Values("between_statements", "after_outbox_insert", "before_commit",
                                           "after_commit_before_reply"));

TEST(StandbyTakeover, StandbyServesWithinTwoSecondsOfTheWriterBeingKilledUnderLoad) {
  auto db = create_database("shard_sb");
  auto port = free_port();
  shard_process writer(db, port);
  ASSERT_NO_FATAL_FAILURE(start_seeded(writer));
  shard_process standby(db, port);
  standby.start();
  ASSERT_TRUE(eventually(
      [&] {
        return query_int(db,
                         "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE "
                         "'%pg_try_advisory_lock%'") >= 1;
      },
      10s));
  load l(port, 6, 300);
  l.start();
  ASSERT_TRUE(eventually([&] { return l.acknowledged() >= 200; }, 20s));
  writer.kill9();
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return http_client(port).call("GET", "/readyz", "", "").status == 200; }, 5s));
  auto takeover = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(takeover, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count() << " ms";
  l.join();
  l.resolve(port);
  EXPECT_EQ(query_int(db, "SELECT epoch FROM shard_writer"), 2) << "the writer, then the standby";
  auto v = check_shard_promises(db);
  EXPECT_TRUE(v.empty()) << v.front();
  standby.terminate();
  EXPECT_EQ(standby.wait_exit(), 0);
}

TEST(Fencing, APausedWriterThatLostItsLockNeverWritesBesideTheNewOne) {
  auto db = create_database("shard_fence");
  auto port = free_port();
  shard_process old_writer(db, port);
  ASSERT_NO_FATAL_FAILURE(start_seeded(old_writer));
  http_client to_old(port);
  ASSERT_EQ(to_old.call("GET", "/readyz", "", "").status, 200);  // connection to the old writer kept open
  ::kill(old_writer.pid(), SIGSTOP);
  // The old writer's lock session is cut, as a network partition would.
  exec_sql(db,
           "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
           "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
  shard_process new_writer(db, port);
  new_writer.start();
  ASSERT_TRUE(eventually([&] { return query_int(db, "SELECT epoch FROM shard_writer") == 2; }, 10s));
  std::thread late([&] {
    json cmd = {{"type", "credit"}, {"tenant", "t1"}, {"account_id", "hot"}, {"biz_id", "late"}, {"amount", 5}};
    auto r = to_old.call("POST", "/v1/commands", cmd.dump());
    EXPECT_NE(r.status, 200) << r.body;
  });
  struct timespec ts {
    0, 100'000'000
  };
  nanosleep(&ts, nullptr);  // let the request reach the stopped process's socket
  ::kill(old_writer.pid(), SIGCONT);
  late.join();
  EXPECT_EQ(old_writer.wait_exit(), 75) << "the old writer must step down: " << old_writer.log_path();
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM operation WHERE biz_id = 'late'"), 0);
  ASSERT_TRUE(new_writer.wait_ready(10s)) << new_writer.log_path();
  auto v = check_shard_promises(db);
  EXPECT_TRUE(v.empty()) << v.front();
  new_writer.terminate();
  EXPECT_EQ(new_writer.wait_exit(), 0);
}

}  // namespace
}  // namespace tally::test
