// database.require_synchronous_standby on a server with no synchronous
// standby (the test server has none, as a promoted standby has none before
// its own standby catches up): every write is refused with 503 and changes
// nothing, until an operator chooses the degraded mode for the database.
#include <gtest/gtest.h>

#include "tests/account_shard/shard_fixture.hpp"

namespace tally::test {
namespace {

class ReplicationGuardTest : public ShardTest {
 protected:
  // Every row a write could leave behind, table by table.
  std::string footprint() {
    std::string out;
    for (const auto* t : {"account", "operation", "ledger_entry", "hold", "lot", "outbox_event"})
      out += std::string(t) + "=" + std::to_string(count(t)) + " ";
    return out + "balance=" + std::to_string(balance("alice"));
  }
};

TEST_F(ReplicationGuardTest, WithoutASynchronousStandbyWritesAreRefusedAndChangeNothing) {
  open("alice", 100);
  restart({"--database.require_synchronous_standby=true"});
  const auto before = footprint();
  for (const auto& c : {command("credit", "alice", "c1", 5), command("debit", "alice", "d1", 5),
                        command("hold", "alice", "h1", 5), command("open_account", "bob", "")}) {
    auto r = client_->call("POST", "/v1/commands", c.dump());
    EXPECT_EQ(r.status, 503) << c.dump() << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "unavailable") << r.body;
  }
  EXPECT_EQ(footprint(), before);
  const auto metrics = client_->call("GET", "/metrics", "", "").body;
  EXPECT_EQ(metrics.find("tally_shard_batches_refused_unreplicated_total 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tally_shard_batches_refused_unreplicated_total "), std::string::npos) << metrics;

  // The documented degraded mode, for this database's new sessions.
  const auto database = query_rows(db_, "SELECT current_database()").at(0).at(0);
  exec_sql(db_, "ALTER DATABASE " + database + " SET tally.accept_unreplicated_writes = on");
  restart({"--database.require_synchronous_standby=true"});
  EXPECT_EQ(send(command("credit", "alice", "c1", 5))["status"], "succeeded");
  EXPECT_EQ(balance("alice"), 105);
}

}  // namespace
}  // namespace tally::test
