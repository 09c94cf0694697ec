#include "account_shard/service/audit_job.hpp"

#include <algorithm>

#include "common/log/log.hpp"

namespace tally::shard {

namespace asio = boost::asio;

std::chrono::milliseconds audit_pause(std::chrono::milliseconds pass, const audit_options& o) {
  const auto share = std::chrono::milliseconds(pass.count() * (100 - o.share_percent) / o.share_percent);
  return std::max(o.pause, share);
}

audit_job::audit_job(asio::any_io_executor ex, queries& reads, audit_options options, metrics::registry& m,
                     std::function<std::int64_t()> writer_epoch)
    : reads_(reads),
      options_(options),
      writer_epoch_(std::move(writer_epoch)),
      loop_(ex),
      pages_(m.add_counter("tally_shard_audit_pages_total", "Pages of full audits checked")),
      accounts_(m.add_counter("tally_shard_audit_accounts_total", "Accounts checked by full audits")),
      failures_(m.add_counter("tally_shard_audit_failures_total", "Audit pages that could not read or commit")) {}

void audit_job::start() {
  loop_.start([this]() -> asio::awaitable<std::chrono::milliseconds> {
    const auto began = std::chrono::steady_clock::now();
    const bool more = co_await run_once();
    const auto pass = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
    co_return more ? audit_pause(pass, options_) : options_.idle;
  });
}

asio::awaitable<bool> audit_job::run_once() {
  auto running = co_await reads_.async_running_audits();
  if (running.error) {
    failures_.inc();
    log::warn("audit: could not read the running audits", {{"error", running.error.message}});
    co_return false;
  }
  bool more = false;
  for (const auto& id : running.body) {
    if (loop_.stopped()) break;
    const auto audit_id = id.get<std::int64_t>();
    auto page = co_await reads_.async_audit_page(audit_id, options_.page_accounts, writer_epoch_());
    if (page.error) {
      // The page committed nothing: the next pass checks it again.
      failures_.inc();
      log::warn("audit: a page failed", {{"audit_id", audit_id}, {"error", page.error.message}});
      more = true;
      continue;
    }
    pages_.inc();
    accounts_.inc(page.body["accounts"].get<std::uint64_t>());
    if (page.body["more"].get<bool>())
      more = true;
    else
      log::info("audit: ended", {{"audit_id", audit_id}});
  }
  co_return more;
}

}  // namespace tally::shard
