#include "account_shard/service/commit_queue.hpp"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "account_shard/store/batch.hpp"
#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

commit_queue::commit_queue(asio::any_io_executor ex, pg::pool& writers, commit_options options,
                           const shard_clock& clock, metrics::registry& m, std::function<void()> on_fenced)
    : ex_(ex),
      writers_(writers),
      options_(options),
      clock_(clock),
      on_fenced_(std::move(on_fenced)),
      drained_(ex, asio::steady_timer::time_point::max()),
      batches_(m.add_counter("tally_shard_batches_total", "Committed batches")),
      commands_(m.add_counter("tally_shard_commands_total", "Commands decided and committed")),
      retries_(m.add_counter("tally_shard_batch_retries_total", "Batches re-run after a transient error")),
      failures_(m.add_counter("tally_shard_batch_failures_total", "Batches answered unavailable or unknown")),
      batch_size_(m.add_histogram("tally_shard_batch_size", "Commands per committed batch",
                                  {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})),
      batch_seconds_(
          m.add_histogram("tally_shard_batch_seconds", "Time from batch start to commit", metrics::latency_bounds())),
      queue_wait_(m.add_histogram("tally_shard_queue_wait_seconds",
                                  "Time a command waited in the commit queue before its batch started",
                                  metrics::latency_bounds())) {}

void commit_queue::start(std::int64_t writer_epoch) {
  epoch_ = writer_epoch;
  for (std::size_t i = 0; i < options_.workers; ++i) {
    ++running_workers_;
    auto worker = [this]() -> asio::awaitable<void> { co_await run_worker(); };
    asio::co_spawn(ex_, worker, asio::detached);
  }
}

asio::awaitable<submit_result> commit_queue::async_submit(command c) {
  std::vector<command> one;
  one.push_back(std::move(c));
  auto results = co_await async_submit_many(std::move(one));
  co_return std::move(results.front());
}

asio::awaitable<std::vector<submit_result>> commit_queue::async_submit_many(std::vector<command> commands) {
  std::vector<submit_result> results(commands.size());
  if (draining_) {
    for (auto& r : results) r = {submit_status::unavailable, {}, "shutting down"};
    co_return results;
  }
  asio::steady_timer done(ex_, asio::steady_timer::time_point::max());
  std::vector<pending> items;
  items.reserve(commands.size());
  const auto queued = std::chrono::steady_clock::now();
  for (auto& c : commands) items.push_back(pending{std::move(c), {}, &done, false, queued});
  for (auto& p : items) queue_.push_back(&p);
  // Commands that all wait for a running batch are taken when it ends.
  if (any_eligible(items)) wake_one_worker();
  for (auto& p : items) {
    while (!p.finished) {
      boost::system::error_code ec;
      co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  for (std::size_t i = 0; i < items.size(); ++i) results[i] = std::move(items[i].result);
  co_return results;
}

// Waking one worker rather than all keeps a per-command pool of many
// workers from stampeding on every submit.
void commit_queue::wake_one_worker() {
  if (idle_workers_.empty()) return;
  idle_workers_.front()->cancel();
  idle_workers_.pop_front();
}

void commit_queue::finish(pending* p, submit_result r) {
  p->result = std::move(r);
  p->finished = true;
  p->done->cancel();
}

bool commit_queue::any_eligible(const std::vector<pending>& items) const {
  return std::any_of(items.begin(), items.end(), [this](const pending& p) {
    return !in_flight_accounts_.contains(batch_state::account_key(p.cmd.tenant, p.cmd.account_id));
  });
}

batch_pick commit_queue::take_batch(std::vector<pending*>& batch) {
  std::vector<std::string> keys;
  keys.reserve(queue_.size());
  for (const auto* p : queue_) keys.push_back(batch_state::account_key(p->cmd.tenant, p->cmd.account_id));
  auto pick = pick_batch(keys, in_flight_accounts_, options_.max_batch);
  batch.clear();
  std::deque<pending*> left;
  std::size_t next = 0;  // into pick.taken
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    if (next < pick.taken.size() && pick.taken[next] == i) {
      batch.push_back(queue_[i]);
      ++next;
    } else {
      left.push_back(queue_[i]);
    }
  }
  queue_ = std::move(left);
  in_flight_accounts_.insert(pick.claimed.begin(), pick.claimed.end());
  return pick;
}

asio::awaitable<void> commit_queue::run_worker() {
  std::vector<pending*> batch;
  for (;;) {
    auto pick = take_batch(batch);
    if (batch.empty()) {
      if (draining_ && queue_.empty()) {
        // The others may be idle behind accounts this worker held.
        while (!idle_workers_.empty()) wake_one_worker();
        if (--running_workers_ == 0) drained_.cancel();
        co_return;
      }
      asio::steady_timer idle(ex_, asio::steady_timer::time_point::max());
      idle_workers_.push_back(&idle);
      boost::system::error_code ec;
      co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      std::erase(idle_workers_, &idle);  // a no-op when a waker already took it off
      continue;
    }
    // More than one batch's worth is ready: another idle worker takes it now.
    if (pick.eligible_left) wake_one_worker();
    co_await run_batch(batch);
    for (const auto& key : pick.claimed) in_flight_accounts_.erase(key);
  }
}

asio::awaitable<void> commit_queue::run_batch(std::vector<pending*>& batch) {
  auto started = std::chrono::steady_clock::now();
  std::vector<command> commands;
  commands.reserve(batch.size());
  for (auto* p : batch) {
    commands.push_back(p->cmd);
    queue_wait_.observe(std::chrono::duration<double>(started - p->queued).count());
  }

  for (int attempt = 0;; ++attempt) {
    pg::lease conn;
    pg::error err = co_await writers_.async_acquire(conn);
    if (err) {
      failures_.inc();
      for (auto* p : batch) finish(p, {submit_status::unavailable, {}, err.message});
      co_return;
    }
    const batch_context ctx{epoch_, clock_.now_ms(), options_.refund_grace_ms};
    batch_outcome out = co_await async_run_batch(*conn, ctx, commands, options_.statement_timeout);
    if (!out.error) {
      batches_.inc();
      commands_.inc(batch.size());
      batch_size_.observe(static_cast<double>(batch.size()));
      batch_seconds_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      for (std::size_t i = 0; i < batch.size(); ++i)
        finish(batch[i], {submit_status::decided, std::move(out.replies[i]), {}});
      co_return;
    }
    if (out.error.code == pg::errc::fenced) {
      log::error("fenced: another writer owns this shard", {{"epoch", epoch_}});
      for (auto* p : batch) finish(p, {submit_status::unavailable, {}, "fenced"});
      on_fenced_();
      co_return;
    }
    if (!out.outcome_unknown && pg::is_transient(out.error.code) && attempt < options_.transient_retries) {
      retries_.inc();
      continue;  // nothing committed; the next attempt re-reads every row
    }
    failures_.inc();
    log::warn("batch failed", {{"size", batch.size()},
                               {"error", out.error.code.message()},
                               {"detail", out.error.message},
                               {"outcome_unknown", out.outcome_unknown}});
    auto status = out.outcome_unknown ? submit_status::outcome_unknown : submit_status::unavailable;
    for (auto* p : batch) finish(p, {status, {}, out.error.message});
    co_return;
  }
}

asio::awaitable<void> commit_queue::async_drain() {
  draining_ = true;
  while (!idle_workers_.empty()) wake_one_worker();
  while (running_workers_ > 0) {
    boost::system::error_code ec;
    drained_.expires_at(asio::steady_timer::time_point::max());
    co_await drained_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

nlohmann::json commit_queue::stats() const {
  const auto batches = batches_.value();
  return {{"batches", batches},
          {"commands", commands_.value()},
          {"batch_retries", retries_.value()},
          {"batch_failures", failures_.value()},
          {"queued", queue_.size()},
          {"mean_batch_size", batches ? static_cast<double>(commands_.value()) / static_cast<double>(batches) : 0.0},
          {"mean_commit_ms",
           batch_seconds_.count() ? batch_seconds_.sum() * 1000.0 / static_cast<double>(batch_seconds_.count()) : 0.0}};
}

}  // namespace tally::shard
