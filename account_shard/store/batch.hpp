#pragma once
// Runs one batch of commands as one PostgreSQL transaction: read and lock
// every row the batch touches (accounts in key order, so concurrent batches
// never deadlock), decide each command in sequence in memory, write all rows
// with a few pipelined multi-row statements, commit. Replies are valid only
// when the batch committed.
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "account_shard/ledger/decide.hpp"
#include "common/pg/connection.hpp"

namespace tally::shard {

// The session of a connection that runs batches: each batch statement is
// planned once per connection instead of for every batch, and the one plan
// probes by key whatever the tables hold (see batch.cpp). Hash and merge
// joins, which would read a whole table for a batch of keys, are off; and
// since the working set is in memory, a random page read costs about what a
// sequential one does.
inline constexpr std::string_view shard_writer_session_sql =
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), "
    "set_config('enable_hashjoin', 'off', false), set_config('enable_mergejoin', 'off', false), "
    "set_config('random_page_cost', '1.1', false)";

struct batch_outcome {
  pg::error error;               // set when nothing is known to be committed
  bool outcome_unknown = false;  // the COMMIT was sent but its answer lost
  std::vector<reply> replies;    // one per command, when !error
};

// Every statement with parameters that a batch may run (for the test that
// their one plan is a probe by key whatever the tables hold).
std::vector<std::string_view> batch_statements();

// What a batch is decided under besides its rows.
struct batch_context {
  std::int64_t writer_epoch = 0;
  std::int64_t now_ms = 0;  // the shard's clock: which lots are due
  std::int64_t refund_grace_ms = 0;
  bool require_synchronous_standby = false;  // refuse while no standby would confirm the commit
};

boost::asio::awaitable<batch_outcome> async_run_batch(pg::connection& conn, const batch_context& ctx,
                                                      std::span<const command> commands,
                                                      std::chrono::milliseconds timeout);

}  // namespace tally::shard
