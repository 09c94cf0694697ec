#pragma once
// A real shard process on a fresh database, with its promises checked
// after every test (tests/account_shard/shard_checker.hpp).
#include <gtest/gtest.h>

#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/account_shard/shard_checker.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::test {

using nlohmann::json;

inline json command(std::string type, std::string account, std::string biz_id, std::int64_t amount = 0,
                    json extra = {}) {
  json c = {{"type", type}, {"tenant", "t1"}, {"account_id", account}};
  if (!biz_id.empty()) c["biz_id"] = biz_id;
  if (amount) c["amount"] = amount;
  for (auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

// Sends one command as a careful client does: a 429 account_busy (hot-account
// admission refused it, nothing changed: on a loaded machine a commit can
// stall past the 20 ms safe wait with commands queued behind it) is resent
// with the same key after a short pause.
inline http_reply send_command(http_client& c, const std::string& body) {
  for (int attempt = 0;; ++attempt) {
    auto r = c.call("POST", "/v1/commands", body);
    if (r.status != 429 || attempt == 500) return r;
    struct timespec pause {
      0, 5'000'000
    };
    nanosleep(&pause, nullptr);
  }
}

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = create_database("shard_it");
    port_ = free_port();
    shard_ = std::make_unique<shard_process>(db_, port_);
    shard_->start();
    ASSERT_TRUE(shard_->wait_ready()) << "shard did not become ready; log: " << shard_->log_path();
    client_ = std::make_unique<http_client>(port_);
  }
  void TearDown() override {
    if (shard_) {
      shard_->terminate();
      EXPECT_EQ(shard_->wait_exit(), 0) << "graceful shutdown must exit 0";
    }
    auto v = check_shard_promises(db_);
    EXPECT_TRUE(v.empty()) << v.front();
  }

  json send(const json& c) {
    auto r = send_command(*client_, c.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }
  void open(const std::string& account, std::int64_t credit = 0) {
    EXPECT_EQ(send(command("open_account", account, ""))["status"], "succeeded");
    if (credit) {
      EXPECT_EQ(send(command("credit", account, "seed-" + account, credit))["status"], "succeeded");
    }
  }
  // `n` commands sent at once, `command_of(i)` from a thread and a
  // connection of its own: their replies, by i.
  template <class CommandOf>
  std::vector<json> send_at_once(std::size_t n, CommandOf command_of) {
    std::vector<json> replies(n);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        http_client c(port_);
        replies[i] = send_command(c, command_of(i).dump()).json();
      });
    for (auto& t : threads) t.join();
    return replies;
  }
  std::int64_t balance(const std::string& account) {
    return query_int(db_, "SELECT balance FROM account WHERE account_id = '" + account + "'");
  }
  std::int64_t count(const std::string& table) { return query_int(db_, "SELECT count(*) FROM " + table); }
  void restart(std::vector<std::string> args = {}, std::map<std::string, std::string> env = {}) {
    shard_ = std::make_unique<shard_process>(db_, port_, std::move(args), std::move(env));
    shard_->start();
    ASSERT_TRUE(shard_->wait_ready()) << shard_->log_path();
    client_ = std::make_unique<http_client>(port_);
  }

  std::string db_;
  std::uint16_t port_ = 0;
  std::unique_ptr<shard_process> shard_;
  std::unique_ptr<http_client> client_;
};

}  // namespace tally::test
