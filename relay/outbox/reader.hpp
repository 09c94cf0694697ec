#pragma once
// One source database as a relay consumer sees it, over one dedicated
// connection: the consumer's exclusive lock (a session advisory lock, so a
// second relay instance stands by and takes over when the first dies), its
// saved cursor, the next events in commit order, and the current state of
// every object (for a projection rebuild).
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/pg/connection.hpp"
#include "relay/outbox/event.hpp"

namespace tally::relay {

// What one read after a cursor found: the events below the horizon, in
// commit order, whether events after them wait for the horizon to pass, and
// the timeline of the server that was read.
struct outbox_batch {
  std::vector<outbox_event> events;
  bool pending = false;
  std::int32_t timeline = 0;
};

// A consumer's saved cursor (the start when none was saved), the timeline
// of the server it was read from (none when saved before timelines were
// kept), and the source's timeline now.
struct saved_cursor {
  cursor at;
  std::optional<std::int32_t> timeline;
  std::int32_t source_timeline = 0;
};

// Whether the source may have lost events that a consumer delivered: its
// server is on another timeline than the one the cursor was read from (a
// standby was promoted since). A planned switchover loses nothing, but the
// timeline alone cannot tell it from a failover that did.
bool source_history_changed(const saved_cursor& c);

// The current document of one object, for a rebuild.
struct object_state {
  object_kind kind = object_kind::account;
  std::string tenant;
  std::string object_id;
  std::int64_t version = 0;
  std::string doc;
  bool settled = false;         // as outbox_event::settled
  std::int64_t updated_ms = 0;  // a saga: when its latest event was written
};

class outbox_reader {
 public:
  // `horizon_scan`: how often the commit-safe horizon is found by a scan
  // of this database's running transactions; in between, the server-wide
  // snapshot's xmin (nearly free) moves it on (see reader.cpp).
  outbox_reader(boost::asio::any_io_executor ex, source_config source, std::string consumer,
                std::chrono::milliseconds timeout, std::chrono::milliseconds horizon_scan);

  const source_config& source() const { return source_; }
  const std::string& consumer() const { return consumer_; }
  bool is_open() const { return conn_.is_open(); }
  // A scanned horizon is forgotten with the connection: a server that
  // restarts after a crash may hand out again ids it never made durable.
  void close() {
    conn_.close();
    scanned_horizon_.clear();
  }

  // Connects (when not connected) without taking a lock: for a reader that
  // only reads.
  boost::asio::awaitable<pg::error> async_open();
  // Connects and tries to take the consumer's lock; `holder` tells whether
  // this reader now holds it. Losing the connection loses the lock.
  boost::asio::awaitable<pg::error> async_take_lock(bool& holder);
  boost::asio::awaitable<pg::error> async_load_cursor(saved_cursor& out);
  // A round trip on the connection: an error when it (and the lock) is lost.
  boost::asio::awaitable<pg::error> async_ping();
  boost::asio::awaitable<pg::error> async_save_cursor(const cursor& c, std::int32_t timeline);
  // Up to `limit` events after `from`, in commit order.
  boost::asio::awaitable<pg::error> async_next(const cursor& from, std::size_t limit, std::vector<outbox_event>& out);
  // The same after each cursor, under one horizon, in one round trip: one
  // batch per cursor, in order.
  boost::asio::awaitable<pg::error> async_read(std::span<const cursor> from, std::size_t limit,
                                               std::vector<outbox_batch>& out);
  // A page of current object states after `after` (nullptr: from the
  // start), in key order; a page shorter than `limit` is the last.
  boost::asio::awaitable<pg::error> async_snapshot(const object_state* after, std::size_t limit,
                                                   std::vector<object_state>& out);

 private:
  source_config source_;
  std::string consumer_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds horizon_scan_;
  std::string scanned_horizon_;  // the last scan's horizon, a transaction id
  std::chrono::steady_clock::time_point scanned_at_{};
  pg::connection conn_;
};

}  // namespace tally::relay
