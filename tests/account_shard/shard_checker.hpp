#pragma once
// Checks promises 1-3 and 7 of DESIGN.md on one shard database, straight
// from its tables: nothing negative, one effect per key, balance equals its
// ledger, held equals the open holds, one outbox event per account version;
// and the lots: they add up to balance and held, one expire entry per expired lot.
#include <string>
#include <vector>

#include "tests/support/pg_fixture.hpp"

namespace tally::test {

inline std::vector<std::string> check_shard_promises(const std::string& db) {
  std::vector<std::string> violations;
  auto expect_none = [&](const std::string& what, const std::string& sql) {
    auto rows = query_rows(db, sql);
    for (const auto& r : rows) {
      std::string line = what + ":";
      for (const auto& c : r) line += " " + c;
      violations.push_back(line);
    }
  };
  expect_none("negative",
              "SELECT tenant, account_id, balance, held FROM account WHERE balance < 0 OR held < 0 OR balance < held");
  expect_none("balance != opening + sum(ledger)",
              "SELECT a.tenant, a.account_id, a.balance, coalesce(sum(l.delta), 0) FROM account a "
              "LEFT JOIN ledger_entry l USING (tenant, account_id) GROUP BY a.tenant, a.account_id, a.balance "
              "HAVING a.balance <> coalesce(sum(l.delta), 0)");
  expect_none("held != open holds",
              "SELECT a.tenant, a.account_id, a.held, coalesce(sum(h.amount) FILTER (WHERE h.state = 'held'), 0) "
              "FROM account a LEFT JOIN hold h USING (tenant, account_id) GROUP BY a.tenant, a.account_id, a.held "
              "HAVING a.held <> coalesce(sum(h.amount) FILTER (WHERE h.state = 'held'), 0)");
  expect_none("ledger entry without its succeeded operation",
              "SELECT l.seq, l.biz_type, l.biz_id FROM ledger_entry l LEFT JOIN operation o "
              "USING (tenant, account_id, biz_type, biz_id) WHERE o.state IS DISTINCT FROM 'succeeded' "
              "OR o.ledger_seq IS DISTINCT FROM l.seq");
  expect_none(
      "operation naming a missing ledger entry",
      "SELECT o.biz_type, o.biz_id, o.ledger_seq FROM operation o LEFT JOIN ledger_entry l ON l.seq = o.ledger_seq "
      "WHERE o.ledger_seq IS NOT NULL AND l.seq IS NULL");
  expect_none(
      "outbox events != account versions",
      "SELECT a.tenant, a.account_id, a.version, count(e.id), count(DISTINCT e.aggregate_version), "
      "coalesce(max(e.aggregate_version), 0) FROM account a LEFT JOIN outbox_event e USING (tenant, account_id) "
      "GROUP BY a.tenant, a.account_id, a.version "
      "HAVING count(e.id) <> a.version OR count(DISTINCT e.aggregate_version) <> a.version "
      "OR coalesce(max(e.aggregate_version), 0) <> a.version");
  expect_none("refunded beyond original", "SELECT biz_type, biz_id FROM operation WHERE refunded > amount");
  expect_none("lots != balance or held",
              "SELECT a.tenant, a.account_id, a.balance, a.held, coalesce(sum(l.remaining), 0), "
              "coalesce(sum(l.held), 0) FROM account a LEFT JOIN lot l USING (tenant, account_id) "
              "GROUP BY a.tenant, a.account_id, a.balance, a.held "
              "HAVING a.balance <> coalesce(sum(l.remaining), 0) OR a.held <> coalesce(sum(l.held), 0)");
  expect_none("expired lot without exactly one expire entry",
              "SELECT l.tenant, l.account_id, l.lot_id, count(e.seq) FROM lot l LEFT JOIN ledger_entry e "
              "ON e.tenant = l.tenant AND e.account_id = l.account_id AND e.biz_type = 'expire' "
              "AND e.biz_id = l.lot_id::text GROUP BY l.tenant, l.account_id, l.lot_id, l.state "
              "HAVING count(e.seq) <> (CASE WHEN l.state = 'expired' THEN 1 ELSE 0 END)");
  return violations;
}

}  // namespace tally::test
