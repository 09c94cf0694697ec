#pragma once
// One reader per source for all of its consumers on this relay instance.
// Consumers keep their own locks and cursors (pump); the feed reads the
// outbox for them over one connection and shares each read: a read after
// cursor c, begun in round r, serves every consumer at c that has heard of
// no wake since r began. Consumers at the same cursor (the usual case: every
// sink delivered the same batches) are read for once; one that fell behind
// (its sink failed) is read for apart, in the same round trip, until it
// catches up with the same horizon and meets the others again. Rounds
// begin at most every read_interval: under load a round gathers what
// committed since the last, in one batch per consumer.
//
// It wakes its consumers when the source notifies `tally_outbox` (a trigger
// on the outbox table, delivered at commit), and on the wake_schedule's
// timers: a short retry while events wait for the horizon, and a slow
// fallback.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/metrics/metrics.hpp"
#include "common/pg/listener.hpp"
#include "relay/outbox/reader.hpp"
#include "relay/service/wake.hpp"

namespace tally::relay {

inline constexpr std::string_view outbox_channel = "tally_outbox";

struct feed_options {
  std::size_t batch = 500;
  std::chrono::milliseconds fallback{1000};   // a wake at least this often
  std::chrono::milliseconds pending_min{2};   // the short retry while events wait for the horizon,
  std::chrono::milliseconds pending_max{50};  // doubling up to this
  std::chrono::milliseconds db_timeout{5000};
  std::chrono::milliseconds read_interval{10};   // rounds of reads begin at most this often
  std::chrono::milliseconds horizon_scan{100};   // see outbox_reader
  std::chrono::milliseconds listen_retry{1000};  // between attempts to listen again
};

// A read as consumers get it: the round it began in and its batch, shared.
struct feed_read {
  std::uint64_t round = 0;
  std::shared_ptr<const outbox_batch> batch;
};

class source_feed {
 public:
  source_feed(boost::asio::any_io_executor ex, source_config source, metrics::registry& metrics, feed_options options);
  source_feed(const source_feed&) = delete;
  source_feed& operator=(const source_feed&) = delete;

  const source_config& source() const { return reader_.source(); }
  // Listens and keeps the wake timers until stop().
  boost::asio::awaitable<void> async_run();
  void stop();

  // The events after `at` from a read begun after round `after` (rounds()
  // for a new one): a read that serves it already, the one under way, or
  // the next, which reads for every cursor asked meanwhile.
  boost::asio::awaitable<pg::error> async_next(const cursor& at, std::uint64_t after, feed_read& out);
  // Rounds of reads begun so far.
  std::uint64_t rounds() const { return rounds_; }
  // Rounds begun before the last wake: a consumer whose read began in a
  // round after this has nothing new to look for.
  std::uint64_t woken_after() const { return woken_after_; }
  // Timers cancelled at the next wake (a consumer waiting for one).
  void watch(boost::asio::steady_timer& t) { watchers_.push_back(&t); }
  void unwatch(boost::asio::steady_timer& t) { std::erase(watchers_, &t); }
  // Reads of the outbox (one per cursor read), for tests and metrics.
  std::uint64_t reads() const { return reads_.value(); }

 private:
  boost::asio::awaitable<void> async_read_round();
  void wake();

  struct cached {
    std::uint64_t round = 0;
    std::shared_ptr<const outbox_batch> batch;
  };

  boost::asio::any_io_executor ex_;
  outbox_reader reader_;
  feed_options options_;
  pg::listener listener_;
  wake_schedule schedule_;
  boost::asio::steady_timer timer_;     // the schedule's next wake
  boost::asio::steady_timer listened_;  // cancelled when the listener has ended
  bool listening_ = false;
  bool stopping_ = false;
  std::uint64_t rounds_ = 0;
  std::uint64_t woken_after_ = 0;
  bool reading_ = false;    // a round is under way (gathering or reading)
  bool gathering_ = false;  // the round under way waits for read_interval to pass
  std::chrono::steady_clock::time_point last_round_at_{};
  std::map<std::string, cursor> wanted_;  // cursors to read in the next round
  std::set<std::string> in_round_;        // cursors of the round under way
  std::map<std::string, cached> cache_;   // the latest read of each cursor, for a few rounds
  std::uint64_t failed_round_ = 0;        // the last round that failed, and why
  pg::error failure_;
  bool failing_ = false;
  std::vector<boost::asio::steady_timer*> watchers_;       // consumers waiting for a wake
  std::vector<boost::asio::steady_timer*> round_waiters_;  // consumers waiting for the round under way
  metrics::counter& reads_;
  metrics::counter& rounds_total_;
  metrics::counter& notified_;
};

}  // namespace tally::relay
