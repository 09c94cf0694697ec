#pragma once
// The expiry job: on the shard's writer, every `interval` it reads the open
// lots whose expiry has come and submits one `expire` command per lot to
// the commit queue, in batches of `batch`, so expiries commit (fenced,
// grouped) beside every other write and never hold ordinary writes up for
// more than one batch. Rerunning is harmless: an expired lot is no longer
// open, and its expire key is stored with its entry.
#include <chrono>
#include <cstdint>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include "account_shard/service/clock.hpp"
#include "account_shard/service/commit_queue.hpp"
#include "account_shard/service/job_loop.hpp"
#include "account_shard/store/queries.hpp"
#include "common/metrics/metrics.hpp"

namespace tally::shard {

struct expiry_options {
  std::chrono::milliseconds interval{1000};
  int batch = 200;
};

class expiry_job {
 public:
  expiry_job(boost::asio::any_io_executor ex, commit_queue& commits, queries& reads, const shard_clock& clock,
             expiry_options options, metrics::registry& metrics);
  void start();
  // Asks the job to stop: it ends after the pass under way.
  void stop() { loop_.stop(); }
  // Returns once the job has ended (after stop()).
  boost::asio::awaitable<void> async_stopped() { return loop_.async_stopped(); }

 private:
  // One pass: expires up to one batch; returns whether a full batch was due.
  boost::asio::awaitable<bool> run_once();

  commit_queue& commits_;
  queries& reads_;
  const shard_clock& clock_;
  expiry_options options_;
  job_loop loop_;
  metrics::counter& expired_;
  metrics::counter& failures_;
};

}  // namespace tally::shard
