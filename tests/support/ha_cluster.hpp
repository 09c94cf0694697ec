#pragma once
// Test access to the replicated cluster that scripts/test starts for the
// tests labelled "ha" (scripts/lib/ha.sh): a pg_auto_failover formation of
// a primary and two standbys. TALLY_TEST_HA_CONNINFO is its multi-host URI
// for database postgres, TALLY_TEST_HA_MONITOR the monitor's conninfo,
// TALLY_TEST_HA_FORMATION the formation's name.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tally::test {

std::string ha_uri(std::string_view database = "postgres");
// Each node's own conninfo (user postgres), in the URI's order.
std::vector<std::string> ha_nodes(std::string_view database = "postgres");
// The node that is not in recovery.
std::string ha_primary(std::string_view database = "postgres");
// Creates a fresh database PREFIX_<random> on the primary, waits until
// every node has replayed it, and returns its multi-host URI.
std::string ha_create_database(std::string_view prefix);
// The server's timeline (a promotion starts a new one).
std::int32_t ha_timeline(const std::string& conninfo);
// Whether the monitor sees one primary and two secondaries, each in the
// state it was assigned.
bool ha_healthy();
// A planned switchover through the monitor; returns once the formation is
// healthy again with another primary (false when `limit` passed first).
bool ha_switchover(std::chrono::seconds limit);

}  // namespace tally::test
