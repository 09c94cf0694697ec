#pragma once
// A real local deployment for orchestrator tests: two account_shard
// processes (each with its own database), a saga store database and one or
// more orchestrator processes, plus the checks of DESIGN.md's promises
// across all of them, computed from the databases alone.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/migrate/migrate.hpp"
#include "common/sharding/routing.hpp"
#include "tests/account_shard/shard_checker.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::test {

inline constexpr const char* tenant = "t1";

struct cluster {
  static constexpr std::size_t buckets = 1024;

  std::vector<std::string> shard_dbs;
  std::vector<std::unique_ptr<shard_process>> shards;
  std::string saga_db;
  std::string routes;
  std::vector<std::unique_ptr<orchestrator_process>> orchestrators;
  std::map<std::string, std::int64_t> opened;  // account -> opening balance

  cluster() {
    for (int i = 0; i < 2; ++i) {
      shard_dbs.push_back(create_database("orch_shard"));
      shards.push_back(std::make_unique<shard_process>(shard_dbs.back(), free_port()));
      shards.back()->start();
      routes +=
          (i ? ";" : "") + std::string("s") + std::to_string(i) + "=127.0.0.1:" + std::to_string(shards.back()->port());
    }
    saga_db = create_database("orch_sagas");
    for (auto& s : shards) EXPECT_TRUE(s->wait_ready()) << s->log_path();
  }

  ~cluster() {
    for (auto& o : orchestrators)
      if (o->running()) o->kill9();
    for (auto& s : shards)
      if (s->running()) s->kill9();
  }

  // Starts an orchestrator instance (the first one applies the migrations).
  orchestrator_process& start_orchestrator(std::map<std::string, std::string> env = {},
                                           std::vector<std::string> args = {}) {
    args.push_back("--lease_ms=1500");
    orchestrators.push_back(
        std::make_unique<orchestrator_process>(saga_db, free_port(), routes, std::move(args), std::move(env)));
    auto& o = *orchestrators.back();
    o.start();
    EXPECT_TRUE(o.wait_ready()) << o.log_path();
    return o;
  }

  std::size_t shard_of(const std::string& account) const {
    auto table = sharding::routing_table::parse(routes, buckets);
    return std::get<sharding::routing_table>(table).shard_of(tenant, account);
  }

  void open(const std::string& account, std::int64_t balance) {
    http_client c(shards[shard_of(account)]->port());
    auto r = c.call("POST", "/v1/commands",
                    nlohmann::json{{"type", "open_account"}, {"tenant", tenant}, {"account_id", account}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    if (balance > 0) {
      r = c.call("POST", "/v1/commands",
                 nlohmann::json{{"type", "credit"},
                                {"tenant", tenant},
                                {"account_id", account},
                                {"biz_id", "opening"},
                                {"amount", balance}}
                     .dump());
      ASSERT_EQ(r.status, 200) << r.body;
    }
    opened[account] = balance;
  }

  std::int64_t column(const std::string& account, const std::string& col) const {
    return query_int(shard_dbs[shard_of(account)],
                     "SELECT " + col + " FROM account WHERE account_id = '" + account + "'");
  }
  std::int64_t balance(const std::string& account) const { return column(account, "balance"); }
  std::int64_t held(const std::string& account) const { return column(account, "held"); }
  // Ledger entries on the account's shard whose key is the saga's.
  std::int64_t entries(const std::string& account, const std::string& saga_id) const {
    return query_int(shard_dbs[shard_of(account)], "SELECT count(*) FROM ledger_entry WHERE account_id = '" + account +
                                                       "' AND biz_id = '" + saga_id + "'");
  }
  std::int64_t sagas(const std::string& where = "true") const {
    return query_int(saga_db, "SELECT count(*) FROM saga WHERE " + where);
  }

  // Every promise that can be checked once all sagas are terminal.
  std::vector<std::string> check_promises() const {
    std::vector<std::string> v;
    for (const auto& db : shard_dbs)
      for (auto& line : check_shard_promises(db)) v.push_back(line);
    const auto open = sagas("state NOT IN ('completed', 'failed', 'compensated')");
    if (open != 0) v.push_back(std::to_string(open) + " sagas are not terminal");
    std::int64_t balances = 0, held_total = 0;
    for (const auto& db : shard_dbs) {
      balances += query_int(db, "SELECT coalesce(sum(balance), 0) FROM account");
      held_total += query_int(db, "SELECT coalesce(sum(held), 0) FROM account");
    }
    if (held_total != 0) v.push_back("value left in holds: " + std::to_string(held_total));
    // Conservation: what the completed sagas say moved in or out, against the shards.
    std::int64_t expected = 0;
    for (const auto& [a, b] : opened) expected += b;
    expected +=
        query_int(saga_db,
                  "SELECT coalesce(sum(CASE type WHEN 'credit' THEN (input->>'amount')::bigint"
                  // What a refund gave back is in its calls' progress ("a"); a
                  // transfer's refund moves value back between two accounts.
                  " WHEN 'refund' THEN CASE WHEN workflow IN ('refund', 'revoke_items') THEN"
                  "   (SELECT coalesce(sum((c->>'a')::bigint), 0) FROM json_array_elements(progress->'calls') st,"
                  "    json_array_elements(st) c) ELSE 0 END"
                  " WHEN 'deduct' THEN -(input->>'amount')::bigint"
                  " WHEN 'batch_deduct' THEN -(SELECT sum((i->>'amount')::bigint)"
                  "   FROM jsonb_array_elements(input->'items') i) ELSE 0 END), 0)"
                  " FROM saga WHERE state = 'completed'");
    if (balances != expected)
      v.push_back("conservation: shards hold " + std::to_string(balances) + ", sagas say " + std::to_string(expected));
    // Every completed transfer moved its amount once; a compensated or failed one moved nothing.
    // Ledger entries per business key, across the shards, in one query each.
    std::map<std::string, std::int64_t> entries_of;
    for (const auto& db : shard_dbs)
      for (const auto& row : query_rows(db, "SELECT biz_id, count(*) FROM ledger_entry GROUP BY biz_id"))
        entries_of[row[0]] += std::stoll(row[1]);
    auto transfers = query_rows(saga_db, "SELECT saga_id, state FROM saga WHERE type = 'transfer'");
    for (const auto& t : transfers) {
      const auto moved = entries_of[t[0]];
      if (t[1] == "completed" ? moved != 2 : moved != 0)
        v.push_back("transfer " + t[0] + " " + t[1] + " has " + std::to_string(moved) + " ledger entries");
    }
    return v;
  }
};

// The orchestrator's internal API as the gateway calls it.
inline http_reply post_saga(http_client& c, const std::string& collection, const nlohmann::json& body,
                            int wait_ms = 10000) {
  return c.call("POST", "/v1/tenants/" + std::string(tenant) + "/" + collection + "?wait_ms=" + std::to_string(wait_ms),
                body.dump());
}
inline http_reply get_saga(http_client& c, const std::string& id, int wait_ms = 0) {
  return c.call("GET", "/v1/tenants/" + std::string(tenant) + "/sagas/" + id + "?wait_ms=" + std::to_string(wait_ms));
}

}  // namespace tally::test
