#pragma once
// The audit job: on the shard's writer it pages every running full audit
// (store/audits.cpp), one page of each in turn with a pause between pages
// so that commands keep their pace (the audit takes at most its share of
// the time: after a pass of T ms it waits T * (100 - share) / share ms, and
// never less than the pause), until none is left running; then it
// waits until an audit is started (poke) or, at the latest, `idle`. A
// writer that starts resumes the audits left running by the one before.
#include <chrono>
#include <cstdint>
#include <functional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include "account_shard/service/job_loop.hpp"
#include "account_shard/store/queries.hpp"
#include "common/metrics/metrics.hpp"

namespace tally::shard {

struct audit_options {
  int page_accounts = 1000;              // audit.page_accounts
  std::chrono::milliseconds pause{20};   // audit.pause_ms, the least wait between pages
  std::chrono::milliseconds idle{5000};  // audit.idle_ms, the longest wait for a new audit
  int share_percent = 20;                // audit.share_percent, 1-100: of the time, the most the pages take
};

// The wait after a pass of pages that took `pass`.
std::chrono::milliseconds audit_pause(std::chrono::milliseconds pass, const audit_options& o);

class audit_job {
 public:
  audit_job(boost::asio::any_io_executor ex, queries& reads, audit_options options, metrics::registry& metrics,
            std::function<std::int64_t()> writer_epoch);
  void start();
  // An audit was started: page it now.
  void poke() { loop_.wake(); }
  // Asks the job to stop: it ends after the page under way.
  void stop() { loop_.stop(); }
  boost::asio::awaitable<void> async_stopped() { return loop_.async_stopped(); }

 private:
  // One page of every running audit; whether any has pages left.
  boost::asio::awaitable<bool> run_once();

  queries& reads_;
  audit_options options_;
  std::function<std::int64_t()> writer_epoch_;
  job_loop loop_;
  metrics::counter& pages_;
  metrics::counter& accounts_;
  metrics::counter& failures_;
};

}  // namespace tally::shard
