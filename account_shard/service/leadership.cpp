#include "account_shard/service/leadership.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "account_shard/store/fence.hpp"
#include "common/log/log.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;

namespace {
constexpr std::string_view sql_try_lock = "SELECT pg_try_advisory_lock(5461726179)";
enum class lock_col { locked };
constexpr std::string_view sql_take_over =
    "UPDATE shard_writer SET epoch = epoch + 1, holder = $1, since = now() RETURNING epoch";
enum class take_over_col { epoch };
constexpr std::string_view sql_ping = "SELECT 1";
constexpr auto timeout = std::chrono::seconds(5);
}  // namespace

leadership::leadership(asio::any_io_executor ex, std::string conninfo, std::string holder)
    : ex_(ex), conninfo_(std::move(conninfo)), holder_(std::move(holder)), lock_conn_(ex) {}

asio::awaitable<std::int64_t> leadership::async_acquire(std::chrono::milliseconds poll) {
  bool announced = false;
  asio::steady_timer timer(ex_);
  for (;;) {
    if (!lock_conn_.is_open()) {
      auto err = co_await lock_conn_.async_connect(conninfo_, timeout);
      if (err) log::warn("writer lock: cannot connect", {{"error", err.message}});
    }
    if (lock_conn_.is_open()) {
      pg::result r;
      auto err = co_await lock_conn_.async_exec(sql_try_lock, r, timeout);
      if (!err && pg::row<lock_col>(r, 0).boolean(lock_col::locked)) {
        // The exclusive fence waits for the old writer's transactions in flight.
        std::vector<pg::statement> take_over{
            {pg::sql_begin, {}}, {sql_fence_exclusive, {}}, {sql_take_over, {holder_}}, {pg::sql_commit, {}}};
        std::vector<pg::result> rs;
        err = co_await lock_conn_.async_pipeline(take_over, rs, timeout);
        if (!err) {
          auto epoch = pg::row<take_over_col>(rs[2], 0).int64(take_over_col::epoch);
          log::info("writer lock acquired", {{"epoch", epoch}, {"holder", holder_}});
          co_return epoch;
        }
        co_await pg::async_rollback(lock_conn_, timeout);
      }
      if (err) log::warn("writer lock: query failed", {{"error", err.message}});
      if (!err && !announced) {
        log::info("standby: another instance is the writer; waiting for its lock");
        announced = true;
      }
    }
    timer.expires_after(poll);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> leadership::async_watch(std::chrono::milliseconds interval, std::function<void()> on_lost) {
  asio::steady_timer timer(ex_);
  while (!stopped_) {
    timer.expires_after(interval);
    co_await timer.async_wait(asio::use_awaitable);
    if (stopped_) break;
    pg::result r;
    auto err = co_await lock_conn_.async_exec(sql_ping, r, timeout);
    if (err) {
      log::error("writer lock session lost", {{"error", err.message}});
      on_lost();
      co_return;
    }
  }
}

}  // namespace tally::shard
