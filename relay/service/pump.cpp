#include "relay/service/pump.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::relay {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

std::string labels(const source_config& s, std::string_view sink) {
  return R"(source=")" + s.name + R"(",sink=")" + std::string(sink) + '"';
}

}  // namespace

pump::pump(asio::any_io_executor ex, source_feed& feed, sink& target, metrics::registry& metrics, pump_options options)
    : feed_(feed),
      reader_(ex, feed.source(), std::string(target.name()), options.db_timeout, options.horizon_scan),
      sink_(target),
      options_(options),
      after_failure_{options.retry_min, options.retry_max},
      timer_(ex),
      delivered_(metrics.add_counter("tally_relay_events_delivered_total", "Events delivered to a sink",
                                     labels(feed.source(), target.name()))),
      rebuilds_(metrics.add_counter("tally_relay_rebuilds_total", "Sink rebuilds from the source database",
                                    labels(feed.source(), target.name()))),
      resyncs_(metrics.add_counter("tally_relay_resyncs_total",
                                   "Sinks that forgot a source and were rebuilt after its timeline changed",
                                   labels(feed.source(), target.name()))),
      lag_(metrics.add_gauge("tally_relay_lag_seconds", "Age of the last event delivered (0 when caught up)",
                             labels(feed.source(), target.name()))),
      holding_(metrics.add_gauge("tally_relay_consumer_held", "1 while this instance holds the consumer's lock",
                                 labels(feed.source(), target.name()))),
      delivery_lag_(metrics.add_histogram("tally_relay_delivery_lag_seconds",
                                          "From an event's transaction to its delivery", metrics::latency_bounds(),
                                          labels(feed.source(), target.name()))) {}

void pump::stop() {
  stopping_ = true;
  timer_.cancel();
}

asio::awaitable<void> pump::pause(milliseconds d) {
  if (stopping_) co_return;
  timer_.expires_after(d);
  co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
}

void pump::lose_source(const std::string& what, const std::string& error) {
  if (holder_) {
    log::warn("relay consumer lost its source",
              {{"source", reader_.source().name}, {"sink", sink_.name()}, {"while", what}, {"error", error}});
  }
  reader_.close();
  holder_ = false;
  holding_.set(0);
}

asio::awaitable<void> pump::async_run() {
  std::size_t failures = 0;
  while (!stopping_) {
    bool holder = false;
    if (auto err = co_await reader_.async_take_lock(holder)) {
      lose_source("connecting", err.message);
      co_await pause(retry::delay(after_failure_, failures++));
      continue;
    }
    if (!holder) {  // another relay instance delivers this consumer: stand by
      co_await pause(options_.standby_poll);
      continue;
    }
    saved_cursor saved;
    if (auto err = co_await reader_.async_load_cursor(saved)) {
      lose_source("loading the cursor", err.message);
      continue;
    }
    holder_ = true;
    holding_.set(1);
    failures = 0;
    timeline_ = saved.source_timeline;
    cursor at = saved.at;
    log::info("relay consumer started", {{"source", reader_.source().name},
                                         {"sink", sink_.name()},
                                         {"tx_id", at.tx_id},
                                         {"id", at.id},
                                         {"timeline", timeline_}});
    if (source_history_changed(saved) && !co_await resync(saved)) {
      co_await pause(options_.retry_min);
      continue;
    }
    if (!co_await deliver_until_stopped(at)) co_await pause(options_.retry_min);
  }
  reader_.close();
  holder_ = false;
  holding_.set(0);
}

// Returns false when the source connection was lost (the lock with it).
asio::awaitable<bool> pump::deliver_until_stopped(cursor& at) {
  std::size_t failures = 0, read_failures = 0;
  auto next_check = std::chrono::steady_clock::now() + options_.idle_check;
  std::uint64_t after = feed_.rounds();  // a read begun from now on
  feed_read got;
  while (!stopping_) {
    if (auto err = co_await feed_.async_next(at, after, got)) {
      // The feed's connection, not this one (the lock is still held): try again.
      co_await pause(retry::delay(after_failure_, read_failures++));
      continue;
    }
    read_failures = 0;
    after = got.round;
    const auto& batch = got.batch->events;
    if (batch.empty()) {
      lag_.set(0);
      if (!co_await until_woken(after, next_check)) co_return false;
      after = std::max(after, feed_.woken_after());
      continue;
    }
    if (got.batch->timeline != timeline_) {
      // The feed and this consumer's connection reached different servers
      // (a failover between their connections): start again from the
      // cursor on the server that holds the lock, which checks the timeline.
      lose_source("reading", "the feed read timeline " + std::to_string(got.batch->timeline) + ", the cursor's is " +
                                 std::to_string(timeline_));
      co_return false;
    }
    auto d = co_await sink_.async_deliver(reader_.source().name, batch);
    if (d.status == delivery_status::rebuild) {
      if (!co_await rebuild()) co_return false;
      continue;  // then deliver the same batch: the version guards drop what the rebuild already wrote
    }
    if (d.status == delivery_status::retry) {
      if (failures == 0)
        log::warn("relay delivery failed; retrying",
                  {{"source", reader_.source().name}, {"sink", sink_.name()}, {"error", d.error}});
      co_await pause(retry::delay(after_failure_, failures++));
      continue;
    }
    if (failures > 0)
      log::info("relay delivery recovered", {{"source", reader_.source().name}, {"sink", sink_.name()}});
    failures = 0;
    const auto now = time::now_unix_ms();
    for (const auto& e : batch) delivery_lag_.observe(static_cast<double>(now - e.created_ms) / 1000.0);
    lag_.set(static_cast<double>(now - batch.back().created_ms) / 1000.0);
    delivered_.inc(batch.size());
    at = cursor{batch.back().tx_id, batch.back().id};
    // Delivered, cursor not yet saved: a crash here redelivers the batch.
    failpoint::hit("relay_after_deliver");
    if (auto err = co_await reader_.async_save_cursor(at, timeline_)) {
      lose_source("saving the cursor", err.message);
      co_return false;
    }
  }
  co_return true;
}

asio::awaitable<bool> pump::until_woken(std::uint64_t after, std::chrono::steady_clock::time_point& next_check) {
  while (!stopping_ && feed_.woken_after() < after) {
    if (std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + options_.idle_check;
      // Idle, the lock's connection carries nothing else: a lost one (and the
      // lock with it) is found here, not at the next save.
      if (auto err = co_await reader_.async_ping()) {
        lose_source("checking the connection", err.message);
        co_return false;
      }
      auto d = co_await sink_.async_check(reader_.source().name);
      if (d.status == delivery_status::rebuild) co_return co_await rebuild();  // then read: events may be waiting
      continue;
    }
    timer_.expires_at(next_check);
    feed_.watch(timer_);
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    feed_.unwatch(timer_);
  }
  co_return true;
}

// The source's server is on another timeline than the cursor's: the sink
// may hold events that the new primary never got, and its version guards
// would keep them over the new primary's own. The sink forgets what it
// holds of this source and is rebuilt from it; then the cursor is saved
// with the new timeline, so a crash before that forgets again.
asio::awaitable<bool> pump::resync(const saved_cursor& saved) {
  const auto& source = reader_.source().name;
  log::warn("relay source changed timeline: the sink forgets it and is rebuilt",
            {{"source", source}, {"sink", sink_.name()}, {"from", *saved.timeline}, {"to", timeline_}});
  std::size_t failures = 0;
  if (!co_await until_answered(failures, [&] { return sink_.async_forget(source); })) co_return true;
  if (!co_await rebuild()) co_return false;
  if (stopping_) co_return true;
  if (auto err = co_await reader_.async_save_cursor(saved.at, timeline_)) {
    lose_source("saving the cursor", err.message);
    co_return false;
  }
  resyncs_.inc();
  co_return true;
}

// Writes every object's current state to the sink, then marks it complete.
// Writes go on meanwhile: events after the cursor are delivered next, and
// the sink's version guards keep whichever state is newer. When the sink
// loses its state again during the rebuild, the rebuild starts over.
asio::awaitable<bool> pump::rebuild() {
  log::warn("relay rebuilding a sink from the source database",
            {{"source", reader_.source().name}, {"sink", sink_.name()}});
  std::size_t failures = 0;
  for (;;) {
    const auto pass = co_await rebuild_pass(failures);
    if (pass == rebuild_result::lost_source) co_return false;
    if (pass == rebuild_result::stopped) co_return true;
    if (pass == rebuild_result::done) break;
    log::warn("relay rebuild started over: the sink lost its state during it",
              {{"source", reader_.source().name}, {"sink", sink_.name()}});
  }
  rebuilds_.inc();
  co_return true;
}

// Retries a sink call until it answers delivered or rebuild (or the pump stops).
asio::awaitable<std::optional<delivery_status>> pump::until_answered(
    std::size_t& failures, const std::function<asio::awaitable<delivery>()>& call) {
  for (;;) {
    if (stopping_) co_return std::nullopt;
    auto d = co_await call();
    if (d.status == delivery_status::delivered || d.status == delivery_status::rebuild) co_return d.status;
    co_await pause(retry::delay(after_failure_, failures++));
  }
}

asio::awaitable<pump::rebuild_result> pump::rebuild_pass(std::size_t& failures) {
  const auto& source = reader_.source().name;
  auto begun = co_await until_answered(failures, [&] { return sink_.async_begin_rebuild(source); });
  if (!begun) co_return rebuild_result::stopped;
  std::vector<object_state> page;
  std::optional<object_state> last;
  std::size_t objects = 0;
  for (;;) {
    if (stopping_) co_return rebuild_result::stopped;
    failpoint::hit("relay_rebuild_page");
    if (auto err = co_await reader_.async_snapshot(last ? &*last : nullptr, options_.rebuild_page, page)) {
      lose_source("reading objects for a rebuild", err.message);
      co_return rebuild_result::lost_source;
    }
    if (!page.empty()) {
      auto written = co_await until_answered(failures, [&] { return sink_.async_restore(source, page); });
      if (!written) co_return rebuild_result::stopped;
      if (*written == delivery_status::rebuild) co_return rebuild_result::again;
      objects += page.size();
      last = page.back();
    }
    if (page.size() < options_.rebuild_page) break;
  }
  auto finished = co_await until_answered(failures, [&] { return sink_.async_finish_rebuild(source); });
  if (!finished) co_return rebuild_result::stopped;
  if (*finished == delivery_status::rebuild) co_return rebuild_result::again;
  log::info("relay rebuilt a sink", {{"source", source}, {"sink", sink_.name()}, {"objects", objects}});
  co_return rebuild_result::done;
}

}  // namespace tally::relay
