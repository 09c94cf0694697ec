#pragma once
// Keeps one source's outbox bounded: every `interval` it reads where each
// registered consumer stands (its cursor row, or none yet for a consumer
// configured here that has not saved one), reports each one's backlog, and
// deletes, in batches of short transactions, the events every consumer has
// delivered that are older than `min_age` (relay/outbox/retention.hpp). A
// consumer that stops holds the outbox from its cursor on: when it resumes,
// it gets every event after it. Several relay instances may prune one
// source at once: a row goes once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/metrics/metrics.hpp"
#include "common/pg/connection.hpp"
#include "relay/outbox/retention.hpp"

namespace tally::relay {

struct prune_options {
  std::chrono::milliseconds interval{10000};   // between passes
  std::chrono::milliseconds min_age{3600000};  // an event younger than this stays, delivered or not
  std::size_t batch = 5000;                    // rows per delete (one transaction)
  std::int64_t backlog_cap = 1000000;          // a consumer's backlog is counted up to this
  std::chrono::milliseconds db_timeout{5000};
};

// What one pass did.
struct prune_pass {
  std::int64_t deleted = 0;
  std::optional<cursor> bound;  // none: some consumer has delivered nothing
  std::vector<consumer_position> consumers;
};

class outbox_pruner {
 public:
  // `consumers`: the consumer names this relay instance delivers for the
  // source (registered even before their first cursor save).
  outbox_pruner(boost::asio::any_io_executor ex, source_config source, std::vector<std::string> consumers,
                metrics::registry& metrics, prune_options options);
  boost::asio::awaitable<void> async_run();
  void stop();
  // One pass (connects when needed); the connection is closed on an error.
  boost::asio::awaitable<pg::error> async_pass(prune_pass& out);

 private:
  boost::asio::awaitable<pg::error> async_positions(std::vector<consumer_position>& out);
  void report_backlog(const std::string& consumer, std::int64_t events, std::optional<std::int64_t> oldest_ms);

  source_config source_;
  std::vector<std::string> consumers_;
  metrics::registry& metrics_;
  prune_options options_;
  pg::connection conn_;
  boost::asio::steady_timer timer_;
  bool stopping_ = false;
  cursor pruned_to_;  // the last event this pruner deleted: rows before it are gone
  metrics::counter& pruned_;
  std::map<std::string, std::pair<metrics::gauge*, metrics::gauge*>> backlog_;  // consumer → events, oldest age
};

}  // namespace tally::relay
