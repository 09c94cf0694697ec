#include "gateway/service/clusters.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"
#include "common/pg/connection.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// Every node with its group's primary (the most advanced node that reports
// being one, for the lag) and its formation's promotions: the monitor's
// events of a node that reached prepare_promotion, one per failover or
// switchover.
constexpr std::string_view sql_nodes =
    "SELECT n.formationid, n.nodename, n.nodehost, n.nodeport, n.reportedstate::text, n.goalstate::text,"
    " n.health, n.reportedtli, n.reportedlsn::text,"
    " coalesce(greatest(pg_wal_lsn_diff(p.reportedlsn, n.reportedlsn), 0), 0)::bigint,"
    " (extract(epoch FROM now() - n.reporttime) * 1000)::bigint, n.replicationquorum, n.candidatepriority,"
    " (extract(epoch FROM now() - f.at) * 1000)::bigint, f.node, f.n"
    " FROM pgautofailover.node n"
    " LEFT JOIN LATERAL (SELECT reportedlsn FROM pgautofailover.node p WHERE p.formationid = n.formationid"
    "  AND p.groupid = n.groupid AND p.reportedstate IN ('primary', 'wait_primary', 'single')"
    "  ORDER BY p.reportedlsn DESC LIMIT 1) p ON true"
    " LEFT JOIN LATERAL (SELECT max(eventtime) AS at, count(*) AS n,"
    "  (array_agg(nodename ORDER BY eventid DESC))[1] AS node FROM pgautofailover.event e"
    "  WHERE e.formationid = n.formationid AND e.reportedstate = 'prepare_promotion'"
    "  AND e.goalstate = 'prepare_promotion') f ON true"
    " ORDER BY n.formationid, n.groupid, n.nodeid";

std::string health_text(std::int64_t h) { return h == 1 ? "good" : h == 0 ? "bad" : "unknown"; }

// A label value as the registry writes it: no quote or backslash to escape.
std::string label(std::string v) {
  for (auto& c : v)
    if (c == '"' || c == '\\') c = '_';
  return v;
}

}  // namespace

json clusters_view(std::span<const monitor_node> nodes) {
  auto formations = json::array();
  for (std::size_t i = 0; i < nodes.size();) {
    const auto& first = nodes[i];
    json f{{"formation", first.formation}, {"primary", nullptr},           {"writable", false},
           {"synchronous_standbys", 0},    {"failovers", first.failovers}, {"last_failover", nullptr}};
    if (first.since_failover_ms)
      f["last_failover"] = {{"node", first.failover_node}, {"seconds_ago", *first.since_failover_ms / 1000}};
    auto list = json::array();
    int synchronous = 0;
    for (; i < nodes.size() && nodes[i].formation == first.formation; ++i) {
      const auto& n = nodes[i];
      if ((n.state == "primary" || n.state == "wait_primary") && n.goal == n.state) {
        f["primary"] = n.name;
        f["writable"] = n.state == "primary";
      }
      if (n.state == "secondary" && n.goal == "secondary" && n.synchronous && n.health == 1) ++synchronous;
      list.push_back({{"name", n.name},
                      {"host", n.host},
                      {"port", n.port},
                      {"state", n.state},
                      {"goal", n.goal},
                      {"health", health_text(n.health)},
                      {"timeline", n.timeline},
                      {"lsn", n.lsn},
                      {"lag_bytes", n.lag_bytes},
                      {"report_age_ms", n.report_age_ms},
                      {"synchronous", n.synchronous},
                      {"candidate_priority", n.candidate_priority}});
    }
    f["synchronous_standbys"] = synchronous;
    f["nodes"] = std::move(list);
    formations.push_back(std::move(f));
  }
  return {{"formations", std::move(formations)}};
}

cluster_watch::cluster_watch(asio::any_io_executor ex, std::string monitor_conninfo, std::chrono::milliseconds poll,
                             metrics::registry& metrics)
    : conninfo_(std::move(monitor_conninfo)),
      poll_(poll),
      metrics_(metrics),
      timer_(std::move(ex)),
      view_({{"configured", true}, {"monitor_reachable", false}, {"formations", json::array()}}),
      monitor_up_(
          metrics.add_gauge("tally_cluster_monitor_up", "1 when the last read of the clusters' monitor worked")) {}

void cluster_watch::stop() {
  stopping_ = true;
  timer_.cancel();
}

void cluster_watch::publish(std::span<const monitor_node> nodes) {
  auto view = clusters_view(nodes);
  for (const auto& f : view["formations"]) {
    const auto formation = R"(formation=")" + label(f["formation"]) + '"';
    metrics_
        .add_gauge("tally_cluster_writable", "1 while the formation has a primary with a synchronous standby",
                   formation)
        .set(f["writable"].get<bool>() ? 1 : 0);
    metrics_.add_gauge("tally_cluster_synchronous_standbys", "Healthy synchronous standbys streaming", formation)
        .set(f["synchronous_standbys"].get<double>());
    metrics_.add_gauge("tally_cluster_failovers", "Promotions the monitor recorded", formation)
        .set(f["failovers"].get<double>());
    metrics_
        .add_gauge("tally_cluster_seconds_since_failover", "Since the formation's last promotion (-1: none recorded)",
                   formation)
        .set(f["last_failover"].is_null() ? -1.0 : f["last_failover"]["seconds_ago"].get<double>());
    for (const auto& n : f["nodes"]) {  // a primary's is 0
      metrics_
          .add_gauge("tally_cluster_standby_lag_bytes", "WAL a standby is behind its primary, as both last reported",
                     formation + R"(,node=")" + label(n["name"]) + '"')
          .set(n["lag_bytes"].get<double>());
    }
  }
  view["configured"] = true;
  view["monitor_reachable"] = true;
  view["observed_at"] = time::rfc3339_ms(time::now_unix_ms());
  view_ = std::move(view);
}

asio::awaitable<void> cluster_watch::async_run() {
  pg::connection conn(timer_.get_executor());
  bool reported = false;  // a failure is logged once until the monitor answers again
  while (!stopping_) {
    pg::error err;
    if (!conn.is_open()) err = co_await conn.async_connect(conninfo_, poll_);
    pg::result r;
    if (!err) err = co_await conn.async_exec(sql_nodes, r, poll_);
    if (err) {
      conn.close();
      monitor_up_.set(0);
      view_["monitor_reachable"] = false;
      if (!reported) log::warn("cannot read the clusters' monitor", {{"error", err.message}});
      reported = true;
    } else {
      std::vector<monitor_node> nodes;
      for (int i = 0; i < r.rows(); ++i) {
        nodes.push_back({std::string(r.text(i, 0)), std::string(r.text(i, 1)), std::string(r.text(i, 2)), r.int64(i, 3),
                         std::string(r.text(i, 4)), std::string(r.text(i, 5)), r.int64(i, 6), r.int64(i, 7),
                         std::string(r.text(i, 8)), r.int64(i, 9), r.int64(i, 10), r.boolean(i, 11), r.int64(i, 12),
                         r.opt_int64(i, 13), r.is_null(i, 14) ? "" : std::string(r.text(i, 14)),
                         r.opt_int64(i, 15).value_or(0)});
      }
      publish(nodes);
      monitor_up_.set(1);
      reported = false;
    }
    timer_.expires_after(poll_);
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace tally::gateway
