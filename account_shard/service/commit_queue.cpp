#include "account_shard/service/commit_queue.hpp"

#include <algorithm>
#include <span>
#include <unordered_map>
#include <utility>

#include "account_shard/store/batch.hpp"
#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

commit_queue::commit_queue(asio::any_io_executor ex, pg::pool& writers, commit_options options,
                           const shard_clock& clock, metrics::registry& m, std::function<void()> on_fenced)
    : writers_(writers),
      options_(options),
      clock_(clock),
      on_fenced_(std::move(on_fenced)),
      batches_(m.add_counter("tally_shard_batches_total", "Committed batches")),
      commands_(m.add_counter("tally_shard_commands_total", "Commands decided and committed")),
      retries_(m.add_counter("tally_shard_batch_retries_total", "Batches re-run after a transient error")),
      failures_(m.add_counter("tally_shard_batch_failures_total", "Batches answered unavailable or unknown")),
      unreplicated_(m.add_counter("tally_shard_batches_refused_unreplicated_total",
                                  "Batches refused because no synchronous standby would confirm them")),
      no_primary_(m.add_counter("tally_shard_batches_refused_no_primary_total",
                                "Batches refused because no writable database (a primary) could be reached")),
      batch_size_(m.add_histogram("tally_shard_batch_size", "Commands per committed batch",
                                  {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})),
      batch_seconds_(
          m.add_histogram("tally_shard_batch_seconds", "Time from batch start to commit", metrics::latency_bounds())),
      queue_wait_(m.add_histogram("tally_shard_queue_wait_seconds",
                                  "Time a command waited in the commit queue before its batch started",
                                  metrics::latency_bounds())),
      account_wait_(m.add_histogram(
          "tally_shard_account_wait_seconds",
          "Time a command that queued behind its own account (commands queued or a batch running on it) waited "
          "before its batch started, refused ones included",
          metrics::latency_bounds())),
      busy_on_arrival_(m.add_counter("tally_shard_account_busy_total",
                                     "Commands refused account_busy (nothing decided or written)", R"(at="arrival")")),
      busy_at_start_(m.add_counter("tally_shard_account_busy_total",
                                   "Commands refused account_busy (nothing decided or written)", R"(at="start")")),
      deepest_account_(m.add_gauge("tally_shard_hottest_account_queued",
                                   "Commands queued for the account with the most, when the last batch started")),
      queue_(
          ex,
          {options.workers, options.max_batch,
           [](const command& c) { return batch_state::account_key(c.tenant, c.account_id); },
           [this](const queue_type::wait_info& w) { note_start(w); },
           [this](const queue_type::wait_info& w) { return refuse_at_start(w); }},
          [this](std::size_t, std::vector<command>& batch, std::vector<submit_result>& results) {
            return run_batch(batch, results);
          },
          submit_result{submit_status::unavailable, {}, "shutting down"}) {}

void commit_queue::start(std::int64_t writer_epoch) {
  epoch_ = writer_epoch;
  queue_.start();
}

submit_result commit_queue::busy(std::chrono::milliseconds retry_after) {
  submit_result r{submit_status::account_busy, {}, "account busy", retry_after};
  return r;
}

admission commit_queue::admit_now(const std::string& account, std::size_t ahead) const {
  const auto k = queue_.key_state(account);
  account_queue q;
  q.queued_ahead = k.queued + ahead;
  if (k.held_since)
    q.in_flight_for = std::chrono::duration_cast<micros>(std::chrono::steady_clock::now() - *k.held_since);
  q.batch_time = batch_time_;
  q.max_batch = options_.max_batch;
  return admit(q, options_.admission);
}

asio::awaitable<submit_result> commit_queue::async_submit(command c) {
  if (options_.admission.enabled()) {
    const auto a = admit_now(batch_state::account_key(c.tenant, c.account_id), 0);
    if (!a.admitted) {
      busy_on_arrival_.inc();
      co_return busy(a.retry_after);
    }
  }
  co_return co_await queue_.async_submit(std::move(c));
}

asio::awaitable<std::vector<submit_result>> commit_queue::async_submit_many(std::vector<command> commands) {
  if (!options_.admission.enabled()) co_return co_await queue_.async_submit_many(std::move(commands));
  std::vector<submit_result> results(commands.size());
  std::vector<command> admitted;
  std::vector<std::size_t> positions;                  // of the admitted commands, in `results`
  std::unordered_map<std::string, std::size_t> ahead;  // this request's admitted commands per account
  for (std::size_t i = 0; i < commands.size(); ++i) {
    auto account = batch_state::account_key(commands[i].tenant, commands[i].account_id);
    const auto a = admit_now(account, ahead[account]);
    if (!a.admitted) {
      busy_on_arrival_.inc();
      results[i] = busy(a.retry_after);
      continue;
    }
    ++ahead[account];
    positions.push_back(i);
    admitted.push_back(std::move(commands[i]));
  }
  if (admitted.empty()) co_return results;
  auto decided = co_await queue_.async_submit_many(std::move(admitted));
  for (std::size_t j = 0; j < decided.size(); ++j) results[positions[j]] = std::move(decided[j]);
  co_return results;
}

void commit_queue::note_start(const queue_type::wait_info& w) {
  queue_wait_.observe(seconds(w.waited));
  if (w.behind_key) account_wait_.observe(seconds(w.waited));
}

std::optional<submit_result> commit_queue::refuse_at_start(const queue_type::wait_info& w) {
  if (!shard::refuse_at_start(std::chrono::duration_cast<micros>(w.waited), w.behind_key, options_.admission))
    return std::nullopt;
  busy_at_start_.inc();
  // Its account is being written now: a safe wait later, the queue that made it late should be gone.
  return busy(std::max(std::chrono::ceil<std::chrono::milliseconds>(options_.admission.max_wait),
                       std::chrono::milliseconds(1)));
}

void commit_queue::note_batch_time(micros t) {
  recent_batches_[recent_count_ % recent_batches_.size()] = t;
  ++recent_count_;
  const auto n = std::min(recent_count_, recent_batches_.size());
  batch_time_ = expected_batch_time(std::span<const micros>(recent_batches_.data(), n));
}

asio::awaitable<void> commit_queue::run_batch(std::vector<command>& batch, std::vector<submit_result>& results) {
  const auto started = std::chrono::steady_clock::now();
  std::size_t deepest = 0;
  for (const auto& [account, queued] : queue_.queued_by_key()) deepest = std::max(deepest, queued);
  deepest_account_.set(static_cast<double>(deepest));
  for (int attempt = 0;; ++attempt) {
    pg::lease conn;
    pg::error err = co_await writers_.async_acquire(conn);
    if (err) {
      failures_.inc();
      if (err.code == pg::errc::connection_failed) no_primary_.inc();
      for (auto& r : results) r = {submit_status::unavailable, {}, err.message};
      co_return;
    }
    const batch_context ctx{epoch_, clock_.now_ms(), options_.refund_grace_ms, options_.require_synchronous_standby};
    batch_outcome out = co_await async_run_batch(*conn, ctx, batch, options_.statement_timeout);
    if (!out.error) {
      batches_.inc();
      commands_.inc(batch.size());
      batch_size_.observe(static_cast<double>(batch.size()));
      const auto took = std::chrono::steady_clock::now() - started;
      batch_seconds_.observe(seconds(took));
      note_batch_time(std::chrono::duration_cast<micros>(took));
      for (std::size_t i = 0; i < batch.size(); ++i)
        results[i] = {submit_status::decided, std::move(out.replies[i]), {}};
      co_return;
    }
    if (out.error.code == pg::errc::fenced) {
      log::error("fenced: another writer owns this shard", {{"epoch", epoch_}});
      for (auto& r : results) r = {submit_status::unavailable, {}, "fenced"};
      on_fenced_();
      co_return;
    }
    if (!out.outcome_unknown && pg::is_transient(out.error.code) && attempt < options_.transient_retries) {
      retries_.inc();
      continue;  // nothing committed; the next attempt re-reads every row
    }
    failures_.inc();
    if (out.error.code == pg::errc::no_synchronous_standby) unreplicated_.inc();
    log::warn("batch failed", {{"size", batch.size()},
                               {"error", out.error.code.message()},
                               {"detail", out.error.message},
                               {"outcome_unknown", out.outcome_unknown}});
    auto status = out.outcome_unknown ? submit_status::outcome_unknown : submit_status::unavailable;
    for (auto& r : results) r = {status, {}, out.error.message};
    co_return;
  }
}

nlohmann::json commit_queue::stats() const {
  const auto batches = batches_.value();
  return {{"batches", batches},
          {"commands", commands_.value()},
          {"batch_retries", retries_.value()},
          {"batch_failures", failures_.value()},
          {"queued", queue_.queued()},
          {"mean_batch_size", batches ? static_cast<double>(commands_.value()) / static_cast<double>(batches) : 0.0},
          {"mean_commit_ms",
           batch_seconds_.count() ? batch_seconds_.sum() * 1000.0 / static_cast<double>(batch_seconds_.count()) : 0.0}};
}

nlohmann::json commit_queue::admission_stats(std::size_t top) const {
  std::vector<std::pair<std::string, std::size_t>> queued(queue_.queued_by_key().begin(), queue_.queued_by_key().end());
  const auto n = std::min(top, queued.size());
  std::partial_sort(
      queued.begin(), queued.begin() + static_cast<std::ptrdiff_t>(n), queued.end(),
      [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  auto hottest = nlohmann::json::array();
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& [key, count] = queued[i];
    const auto split = key.find('\x1f');
    nlohmann::json a{{"tenant", key.substr(0, split)}, {"account_id", key.substr(split + 1)}, {"queued", count}};
    const auto held = queue_.key_state(key).held_since;
    a["batch_running_ms"] =
        held ? nlohmann::json(std::chrono::duration<double, std::milli>(now - *held).count()) : nlohmann::json(nullptr);
    hottest.push_back(std::move(a));
  }
  return {{"max_wait_ms", std::chrono::duration<double, std::milli>(options_.admission.max_wait).count()},
          {"expected_batch_ms", std::chrono::duration<double, std::milli>(batch_time_).count()},
          {"refused_on_arrival", busy_on_arrival_.value()},
          {"refused_at_start", busy_at_start_.value()},
          {"hottest", std::move(hottest)}};
}

}  // namespace tally::shard
