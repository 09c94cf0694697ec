#include "tests/support/ha_cluster.hpp"

#include <random>
#include <regex>
#include <stdexcept>
#include <thread>

#include "tests/support/pg_fixture.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::test {
namespace {

std::string formation() { return env_or_throw("TALLY_TEST_HA_FORMATION"); }

// The URI names its database after the host list: postgres://user@hosts/DB?…
std::string with_database(const std::string& uri, std::string_view database) {
  static const std::regex path(R"(^(postgres(?:ql)?://[^/]*/)[^?]*)");
  return std::regex_replace(uri, path, "$1" + std::string(database), std::regex_constants::format_first_only);
}

}  // namespace

std::string ha_uri(std::string_view database) {
  return with_database(env_or_throw("TALLY_TEST_HA_CONNINFO"), database);
}

std::vector<std::string> ha_nodes(std::string_view database) {
  const auto uri = env_or_throw("TALLY_TEST_HA_CONNINFO");
  std::smatch m;
  static const std::regex hosts(R"(^postgres(?:ql)?://([^@/]*@)?([^/?]+))");
  std::vector<std::string> out;
  if (!std::regex_search(uri, m, hosts)) return out;
  const std::string list = m[2];
  static const std::regex host_port(R"(([^,:]+):(\d+))");
  for (std::sregex_iterator it(list.begin(), list.end(), host_port), end; it != end; ++it)
    out.push_back("host=" + (*it)[1].str() + " port=" + (*it)[2].str() +
                  " user=postgres dbname=" + std::string(database) + " connect_timeout=3");
  return out;
}

std::string ha_primary(std::string_view database) {
  for (const auto& n : ha_nodes(database)) {
    try {
      if (query_int(n, "SELECT (NOT pg_is_in_recovery())::int") == 1) return n;
    } catch (const std::exception&) {
      // a node that is down or restarting
    }
  }
  return "";
}

std::string ha_create_database(std::string_view prefix) {
  std::random_device rd;
  const std::string name = std::string(prefix) + "_" + std::to_string(rd() % 1000000000);
  exec_sql(ha_primary(), "CREATE DATABASE " + name);
  // libpq tries no further host after a node refuses the connection for a
  // database it has not replayed yet: wait until every node has it.
  const auto replayed = [&] {
    for (const auto& n : ha_nodes())
      if (query_int(n, "SELECT count(*) FROM pg_database WHERE datname = '" + name + "'") != 1) return false;
    return true;
  };
  if (!eventually(replayed, std::chrono::seconds(30)))
    throw std::runtime_error("database " + name + " did not reach every node");
  return ha_uri(name);
}

std::int32_t ha_timeline(const std::string& conninfo) {
  return static_cast<std::int32_t>(
      query_int(conninfo, "SELECT ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::int"));
}

bool ha_healthy() {
  const auto f = formation();
  return query_int(env_or_throw("TALLY_TEST_HA_MONITOR"),
                   "SELECT (count(*) FILTER (WHERE reportedstate = 'primary' AND goalstate = 'primary') = 1"
                   " AND count(*) FILTER (WHERE reportedstate = 'secondary' AND goalstate = 'secondary') = 2)::int"
                   " FROM pgautofailover.node WHERE formationid = '" +
                       f + "'") == 1;
}

bool ha_switchover(std::chrono::seconds limit) {
  const auto before = ha_primary();
  exec_sql(env_or_throw("TALLY_TEST_HA_MONITOR"), "SELECT pgautofailover.perform_failover('" + formation() + "', 0)");
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a poll of the monitor, not a synchronisation
    try {
      if (ha_healthy()) {
        const auto now = ha_primary();
        if (!now.empty() && now != before) return true;
      }
    } catch (const std::exception&) {
      // a node restarting during the switchover
    }
  }
  return false;
}

}  // namespace tally::test
