#include "relay/service/feed.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"

namespace tally::relay {

namespace asio = boost::asio;
using std::chrono::steady_clock;

namespace {

// How many rounds a read stays to serve a consumer that comes later (one
// whose sink is slower delivered the same batch): its cursor's read is
// usually the one the faster consumer asked for a round or two before.
constexpr std::uint64_t keep_rounds = 16;

std::string key_of(const cursor& c) { return c.tx_id + '/' + std::to_string(c.id); }

std::string labels(const source_config& s) { return R"(source=")" + s.name + '"'; }

}  // namespace

source_feed::source_feed(asio::any_io_executor ex, source_config source, metrics::registry& metrics,
                         feed_options options)
    : ex_(ex),
      reader_(ex, source, "", options.db_timeout, options.horizon_scan),
      options_(options),
      listener_(ex, source.conninfo, {std::string(outbox_channel)},
                pg::listener_handlers{[this](std::string_view, std::string_view) {
                                        notified_.inc();
                                        wake();
                                      },
                                      [this] { wake(); }},
                options.listen_retry),
      schedule_(options.fallback, retry::backoff{options.pending_min, options.pending_max}, steady_clock::now()),
      timer_(ex),
      listened_(ex),
      reads_(metrics.add_counter("tally_relay_reads_total", "Reads of a source's outbox (one per cursor read)",
                                 labels(source))),
      rounds_total_(metrics.add_counter("tally_relay_read_rounds_total",
                                        "Round trips reading a source's outbox (one horizon each)", labels(source))),
      notified_(metrics.add_counter("tally_relay_notifications_total", "Notifications of new outbox events",
                                    labels(source))) {}

void source_feed::stop() {
  stopping_ = true;
  timer_.cancel();
  listener_.stop();
  for (auto* t : watchers_) t->cancel();
  watchers_.clear();
}

void source_feed::wake() {
  woken_after_ = rounds_;
  schedule_.woken(steady_clock::now());
  for (auto* t : watchers_) t->cancel();
  watchers_.clear();
}

asio::awaitable<void> source_feed::async_run() {
  listening_ = true;
  auto listen = [this]() -> asio::awaitable<void> { co_await listener_.async_run(); };
  asio::co_spawn(ex_, listen, [this](std::exception_ptr e) {
    if (e) log::exit_on_failure(e);
    listening_ = false;
    listened_.cancel();
  });
  while (!stopping_) {
    timer_.expires_at(schedule_.due());
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    // Cancelled: stopping, or a round planned a sooner retry.
    if (!stopping_ && steady_clock::now() >= schedule_.due()) wake();
  }
  listener_.stop();
  if (listening_) {
    listened_.expires_at(steady_clock::time_point::max());
    co_await listened_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<pg::error> source_feed::async_next(const cursor& at, std::uint64_t after, feed_read& out) {
  const auto key = key_of(at);
  for (;;) {
    if (auto it = cache_.find(key); it != cache_.end() && it->second.round > after) {
      out = feed_read{it->second.round, it->second.batch};
      co_return pg::error{};
    }
    if (!reading_) {
      wanted_.try_emplace(key, at);
      co_await async_read_round();
      if (failed_round_ == rounds_) co_return failure_;
      continue;
    }
    // A round is under way: wait for it when it reads this cursor and
    // began late enough, else ask for the next.
    const auto waited = rounds_ + (gathering_ ? 1 : 0);  // the number it has or will have
    if (waited <= after || !in_round_.contains(key)) wanted_.try_emplace(key, at);
    asio::steady_timer done(ex_, steady_clock::time_point::max());
    round_waiters_.push_back(&done);
    co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
    if (failed_round_ == waited) co_return failure_;
  }
}

asio::awaitable<void> source_feed::async_read_round() {
  reading_ = true;
  // Too soon after the last round: gather the cursors asked meanwhile, and
  // read them all (and what committed meanwhile) in one round.
  if (const auto at = last_round_at_ + options_.read_interval; steady_clock::now() < at) {
    gathering_ = true;
    in_round_.clear();
    asio::steady_timer gather(ex_, at);
    co_await gather.async_wait(asio::as_tuple(asio::use_awaitable));
    gathering_ = false;
  }
  const auto round = ++rounds_;
  last_round_at_ = steady_clock::now();
  std::vector<std::string> keys;
  std::vector<cursor> cursors;
  for (auto& [key, c] : wanted_) {
    keys.push_back(key);
    cursors.push_back(std::move(c));
  }
  wanted_.clear();
  in_round_ = std::set<std::string>(keys.begin(), keys.end());
  std::vector<outbox_batch> batches;
  pg::error err;
  if (!reader_.is_open()) err = co_await reader_.async_open();
  if (!err) err = co_await reader_.async_read(cursors, options_.batch, batches);
  rounds_total_.inc();
  reads_.inc(cursors.size());
  bool pending = false;
  if (err) {
    if (!failing_) log::warn("relay could not read a source", {{"source", source().name}, {"error", err.message}});
    failing_ = true;
    reader_.close();
    failed_round_ = round;
    failure_ = err;
  } else {
    if (failing_) log::info("relay reads a source again", {{"source", source().name}});
    failing_ = false;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      pending = pending || (batches[i].pending && batches[i].events.size() < options_.batch);
      cache_[keys[i]] = cached{round, std::make_shared<const outbox_batch>(std::move(batches[i]))};
    }
  }
  std::erase_if(cache_, [&](const auto& kv) { return kv.second.round + keep_rounds <= round; });
  schedule_.read(steady_clock::now(), pending);
  if (schedule_.due() < timer_.expiry()) timer_.cancel();
  reading_ = false;
  auto waiters = std::move(round_waiters_);
  round_waiters_.clear();
  for (auto* t : waiters) t->cancel();
}

}  // namespace tally::relay
