#pragma once
// Group commit. Commands submitted concurrently wait in one queue; each
// worker takes everything queued (up to max_batch) and runs it as one
// transaction, so under load many commands share one commit. With
// per-command mode (max_batch 1, many workers) every command is its own
// transaction: the classic design, kept for comparison.
//
// Batches in flight at the same time never share an account: a command
// whose account belongs to a running batch stays queued (in order, ahead
// of later commands on that account) until that batch has committed. So
// concurrent transactions never wait on each other's row locks, and the
// workers keep both PostgreSQL and this process busy instead of queueing
// behind one another.
//
// The queue is a batching::coalescer keyed by account; this class adds
// what a flush is here: a batch (store/batch.hpp) under the writer epoch,
// its retries, fencing and metrics; and hot-account admission
// (admission.hpp): a command that would wait longer than the maximum wait
// behind its own account is answered `busy` without being decided.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "account_shard/ledger/decide.hpp"
#include "account_shard/service/admission.hpp"
#include "account_shard/service/clock.hpp"
#include "common/batching/coalescer.hpp"
#include "common/metrics/metrics.hpp"
#include "common/pg/pool.hpp"

namespace tally::shard {

struct commit_options {
  std::size_t max_batch = 1000;
  std::size_t workers = 1;
  std::chrono::milliseconds statement_timeout{5000};
  int transient_retries = 5;
  std::int64_t refund_grace_ms = 7LL * 24 * 3600 * 1000;  // refund.expired_lot_grace
  admission_policy admission;                             // admission.max_wait_ms
  bool require_synchronous_standby = false;               // database.require_synchronous_standby
};

enum class submit_status {
  decided,          // `decision` holds the committed reply
  unavailable,      // nothing was committed: resend the same key
  outcome_unknown,  // the commit's answer was lost: resend the same key to learn it
  account_busy,     // refused by admission, nothing sent to PostgreSQL: resend the same key after retry_after
};

struct submit_result {
  submit_status status = submit_status::unavailable;
  reply decision;
  std::string detail;                        // for logs, never for clients
  std::chrono::milliseconds retry_after{0};  // account_busy
};

class commit_queue {
 public:
  commit_queue(boost::asio::any_io_executor ex, pg::pool& writers, commit_options options, const shard_clock& clock,
               metrics::registry& metrics, std::function<void()> on_fenced);
  void start(std::int64_t writer_epoch);
  boost::asio::awaitable<submit_result> async_submit(command c);
  // Queues every command at once (they may share batches); one result each.
  boost::asio::awaitable<std::vector<submit_result>> async_submit_many(std::vector<command> commands);
  // Refuses new commands, lets the queued ones commit, then returns.
  boost::asio::awaitable<void> async_drain() { return queue_.async_drain(); }
  std::size_t depth() const { return queue_.queued(); }
  // Totals since start, for operators (GET /v1/status).
  nlohmann::json stats() const;
  // The admission figures and the `top` accounts with the most commands
  // queued now (GET /v1/status).
  nlohmann::json admission_stats(std::size_t top) const;

 private:
  using queue_type = batching::coalescer<command, submit_result>;
  // Admission on arrival; `ahead` counts the request's own earlier commands on the account.
  admission admit_now(const std::string& account, std::size_t ahead) const;
  void note_batch_time(micros t);
  void note_start(const queue_type::wait_info& w);
  std::optional<submit_result> refuse_at_start(const queue_type::wait_info& w);
  submit_result busy(std::chrono::milliseconds retry_after);

  // Runs one batch (retrying transient errors) and answers each command.
  boost::asio::awaitable<void> run_batch(std::vector<command>& batch, std::vector<submit_result>& results);

  pg::pool& writers_;
  commit_options options_;
  const shard_clock& clock_;
  std::function<void()> on_fenced_;
  std::int64_t epoch_ = 0;

  metrics::counter& batches_;
  metrics::counter& commands_;
  metrics::counter& retries_;
  metrics::counter& failures_;
  metrics::counter& unreplicated_;
  metrics::counter& no_primary_;
  metrics::histogram& batch_size_;
  metrics::histogram& batch_seconds_;
  metrics::histogram& queue_wait_;
  metrics::histogram& account_wait_;
  metrics::counter& busy_on_arrival_;
  metrics::counter& busy_at_start_;
  metrics::gauge& deepest_account_;
  // The last batches' times, for admission's estimate.
  std::array<micros, 16> recent_batches_{};
  std::size_t recent_count_ = 0;
  micros batch_time_{0};  // expected_batch_time(recent)
  // Last: destroyed first, while what its flushes use still exists.
  queue_type queue_;
};

}  // namespace tally::shard
