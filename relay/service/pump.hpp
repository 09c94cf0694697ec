#pragma once
// One relay consumer: the events of one source, delivered to one sink, in
// commit order, at least once. It holds the consumer's lock in the source
// database while it runs (another relay instance stands by), takes its
// batches from the source's feed (shared with the source's other
// consumers), saves its cursor after each delivered batch, retries a
// failing sink with capped exponential backoff, and rebuilds the sink when
// it lost its state, or after forgetting what it held of the source when
// the source's server changed timeline (a failover). Idle, it waits for the
// feed's next wake.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/metrics/metrics.hpp"
#include "common/retry/backoff.hpp"
#include "relay/outbox/reader.hpp"
#include "relay/service/feed.hpp"
#include "relay/sink/sink.hpp"

namespace tally::relay {

struct pump_options {
  std::chrono::milliseconds standby_poll{500};  // how often a stand-by tries the lock
  std::chrono::milliseconds idle_check{1000};   // how often an idle consumer checks its connection and asks its sink
                                                // whether it lost its state
  std::chrono::milliseconds retry_min{50};
  std::chrono::milliseconds retry_max{5000};
  std::chrono::milliseconds db_timeout{5000};
  std::chrono::milliseconds horizon_scan{100};  // see outbox_reader (the lock's connection reads only for rebuilds)
  std::size_t rebuild_page = 500;               // objects per read and write of a rebuild
};

class pump {
 public:
  pump(boost::asio::any_io_executor ex, source_feed& feed, sink& target, metrics::registry& metrics,
       pump_options options);
  boost::asio::awaitable<void> async_run();
  void stop();
  bool holder() const { return holder_; }
  const std::string& source_name() const { return reader_.source().name; }
  std::string_view sink_name() const { return sink_.name(); }
  double lag_seconds() const { return lag_.value(); }

 private:
  boost::asio::awaitable<bool> deliver_until_stopped(cursor& at);
  enum class rebuild_result { done, again, stopped, lost_source };
  boost::asio::awaitable<bool> rebuild();
  boost::asio::awaitable<rebuild_result> rebuild_pass(std::size_t& failures);
  boost::asio::awaitable<std::optional<delivery_status>> until_answered(
      std::size_t& failures, const std::function<boost::asio::awaitable<delivery>()>& call);
  boost::asio::awaitable<void> pause(std::chrono::milliseconds d);
  // Until the feed wakes after round `after` began (or the sink was
  // rebuilt), checking the lock's connection and the sink every idle_check
  // meanwhile; false when the source connection was lost.
  boost::asio::awaitable<bool> until_woken(std::uint64_t after, std::chrono::steady_clock::time_point& next_check);
  void lose_source(const std::string& what, const std::string& error);
  boost::asio::awaitable<bool> resync(const saved_cursor& saved);

  source_feed& feed_;
  outbox_reader reader_;
  sink& sink_;
  pump_options options_;
  const retry::backoff after_failure_;  // retry_min doubling up to retry_max
  boost::asio::steady_timer timer_;
  bool stopping_ = false;
  bool holder_ = false;
  std::int32_t timeline_ = 0;  // the source's, read with the cursor
  metrics::counter& delivered_;
  metrics::counter& rebuilds_;
  metrics::counter& resyncs_;
  metrics::gauge& lag_;
  metrics::gauge& holding_;
  metrics::histogram& delivery_lag_;
};

}  // namespace tally::relay
