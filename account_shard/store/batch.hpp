#pragma once
// Runs one batch of commands as one PostgreSQL transaction: read and lock
// every row the batch touches (accounts in key order, so concurrent batches
// never deadlock), decide each command in sequence in memory, write all rows
// with a few pipelined multi-row statements, commit. Replies are valid only
// when the batch committed.
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "account_shard/ledger/decide.hpp"
#include "common/pg/connection.hpp"

namespace tally::shard {

struct batch_outcome {
  pg::error error;             // set when nothing is known to be committed
  bool outcome_unknown = false;  // the COMMIT was sent but its answer lost
  std::vector<reply> replies;  // one per command, when !error
};

boost::asio::awaitable<batch_outcome> async_run_batch(pg::connection& conn, std::int64_t writer_epoch,
                                                      std::span<const command> commands,
                                                      std::chrono::milliseconds timeout);

}  // namespace tally::shard
