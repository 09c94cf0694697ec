#include "account_shard/service/commit_queue.hpp"

#include "account_shard/store/batch.hpp"
#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

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
      batch_size_(m.add_histogram("tally_shard_batch_size", "Commands per committed batch",
                                  {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})),
      batch_seconds_(
          m.add_histogram("tally_shard_batch_seconds", "Time from batch start to commit", metrics::latency_bounds())),
      queue_wait_(m.add_histogram("tally_shard_queue_wait_seconds",
                                  "Time a command waited in the commit queue before its batch started",
                                  metrics::latency_bounds())),
      queue_(
          ex,
          {options.workers, options.max_batch,
           [](const command& c) { return batch_state::account_key(c.tenant, c.account_id); },
           [this](std::chrono::steady_clock::duration waited) {
             queue_wait_.observe(std::chrono::duration<double>(waited).count());
           }},
          [this](std::size_t, std::vector<command>& batch, std::vector<submit_result>& results) {
            return run_batch(batch, results);
          },
          submit_result{submit_status::unavailable, {}, "shutting down"}) {}

void commit_queue::start(std::int64_t writer_epoch) {
  epoch_ = writer_epoch;
  queue_.start();
}

asio::awaitable<void> commit_queue::run_batch(std::vector<command>& batch, std::vector<submit_result>& results) {
  const auto started = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    pg::lease conn;
    pg::error err = co_await writers_.async_acquire(conn);
    if (err) {
      failures_.inc();
      for (auto& r : results) r = {submit_status::unavailable, {}, err.message};
      co_return;
    }
    const batch_context ctx{epoch_, clock_.now_ms(), options_.refund_grace_ms};
    batch_outcome out = co_await async_run_batch(*conn, ctx, batch, options_.statement_timeout);
    if (!out.error) {
      batches_.inc();
      commands_.inc(batch.size());
      batch_size_.observe(static_cast<double>(batch.size()));
      batch_seconds_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
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

}  // namespace tally::shard
