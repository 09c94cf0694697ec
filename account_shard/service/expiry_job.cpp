#include "account_shard/service/expiry_job.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

expiry_job::expiry_job(asio::any_io_executor ex, commit_queue& commits, queries& reads, const shard_clock& clock,
                       expiry_options options, metrics::registry& m)
    : commits_(commits),
      reads_(reads),
      clock_(clock),
      options_(options),
      timer_(ex),
      ended_(ex, asio::steady_timer::time_point::max()),
      expired_(m.add_counter("tally_shard_lots_expired_total", "Lots expired by the expiry job")),
      failures_(m.add_counter("tally_shard_expiry_failures_total", "Expiry passes that could not read or commit")) {}

void expiry_job::start() {
  running_ = true;
  asio::co_spawn(
      timer_.get_executor(), [this]() -> asio::awaitable<void> { co_await run(); }, asio::detached);
}

void expiry_job::stop() {
  stopped_ = true;
  timer_.cancel();
}

asio::awaitable<void> expiry_job::async_stopped() {
  while (running_) {
    boost::system::error_code ec;
    co_await ended_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> expiry_job::run() {
  while (!stopped_) {
    // A full batch means more are due: the next pass starts at once.
    if (co_await run_once()) continue;
    if (stopped_) break;
    timer_.expires_after(options_.interval);
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  running_ = false;
  ended_.cancel();
}

asio::awaitable<bool> expiry_job::run_once() {
  auto due = co_await reads_.async_due_lots(clock_.now_ms(), options_.batch);
  if (due.error) {
    failures_.inc();
    log::warn("expiry: could not read the due lots", {{"error", due.error.message}});
    co_return false;
  }
  if (due.body.empty() || stopped_) co_return false;
  std::vector<command> expiries;
  for (const auto& lot : due.body) {
    command c;
    c.kind = command_kind::expire;
    c.tenant = lot[0].get<std::string>();
    c.account_id = lot[1].get<std::string>();
    c.biz_id = std::to_string(lot[2].get<std::int64_t>());
    c.request_hash = request_hash(c);
    expiries.push_back(std::move(c));
  }
  const bool full = static_cast<int>(expiries.size()) == options_.batch;
  auto results = co_await commits_.async_submit_many(std::move(expiries));
  std::size_t done = 0;
  for (const auto& r : results) {
    if (r.status != submit_status::decided) {
      failures_.inc();
      co_return false;  // the next pass retries what is still open
    }
    if (r.decision.status == reply_status::succeeded && !r.decision.replayed) ++done;
  }
  expired_.inc(done);
  if (done > 0) log::info("expiry: lots expired", {{"lots", done}});
  co_return full&& done > 0;
}

}  // namespace tally::shard
