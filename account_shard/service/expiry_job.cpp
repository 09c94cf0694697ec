#include "account_shard/service/expiry_job.hpp"

#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

expiry_job::expiry_job(asio::any_io_executor ex, commit_queue& commits, queries& reads, const shard_clock& clock,
                       expiry_options options, metrics::registry& m)
    : commits_(commits),
      reads_(reads),
      clock_(clock),
      options_(options),
      loop_(ex),
      expired_(m.add_counter("tally_shard_lots_expired_total", "Lots expired by the expiry job")),
      failures_(m.add_counter("tally_shard_expiry_failures_total", "Expiry passes that could not read or commit")) {}

void expiry_job::start() {
  // A full batch means more are due: the next pass starts at once.
  loop_.start([this]() -> asio::awaitable<std::chrono::milliseconds> {
    co_return co_await run_once() ? std::chrono::milliseconds(0) : options_.interval;
  });
}

asio::awaitable<bool> expiry_job::run_once() {
  auto due = co_await reads_.async_due_lots(clock_.now_ms(), options_.batch);
  if (due.error) {
    failures_.inc();
    log::warn("expiry: could not read the due lots", {{"error", due.error.message}});
    co_return false;
  }
  if (due.body.empty() || loop_.stopped()) co_return false;
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
