#pragma once
// The replicated PostgreSQL clusters as their manager sees them (docs/ha.md):
// the gateway reads pg_auto_failover's monitor every `poll` for the
// operators — GET /v1/admin/clusters, the console, `tallyctl clusters` —
// and for its metrics. Read only: nothing about value depends on it.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "common/metrics/metrics.hpp"

namespace tally::gateway {

// One node as the monitor last heard of it, with its formation's failovers.
struct monitor_node {
  std::string formation;
  std::string name;
  std::string host;
  std::int64_t port = 0;
  std::string state;         // what its keeper reported: primary, secondary, wait_primary, catchingup, demoted, ...
  std::string goal;          // what the monitor assigned
  std::int64_t health = -1;  // the monitor's health check: 1 good, 0 bad, -1 not checked yet
  std::int64_t timeline = 0;
  std::string lsn;
  std::int64_t lag_bytes = 0;  // behind its group's primary, as both last reported
  std::int64_t report_age_ms = 0;
  bool synchronous = false;  // counts for the synchronous quorum
  std::int64_t candidate_priority = 0;
  std::optional<std::int64_t> since_failover_ms;  // the formation's last promotion, none recorded yet
  std::string failover_node;                      // the node it promoted
  std::int64_t failovers = 0;                     // promotions the monitor recorded
};

// {"formations": [{"formation", "primary", "writable", "synchronous_standbys",
// "nodes": [...], "failovers", "last_failover"}]} from rows in formation
// order. `writable`: a node reports and is assigned `primary` (with a
// synchronous standby; `wait_primary` writes alone, which the services'
// guard refuses).
nlohmann::json clusters_view(std::span<const monitor_node> nodes);

class cluster_watch {
 public:
  cluster_watch(boost::asio::any_io_executor ex, std::string monitor_conninfo, std::chrono::milliseconds poll,
                metrics::registry& metrics);
  boost::asio::awaitable<void> async_run();
  void stop();
  // The last view, with "observed_at" and "monitor_reachable".
  const nlohmann::json& view() const { return view_; }

 private:
  void publish(std::span<const monitor_node> nodes);
  std::string conninfo_;
  std::chrono::milliseconds poll_;
  metrics::registry& metrics_;
  boost::asio::steady_timer timer_;
  bool stopping_ = false;
  nlohmann::json view_;
  metrics::gauge& monitor_up_;
};

}  // namespace tally::gateway
