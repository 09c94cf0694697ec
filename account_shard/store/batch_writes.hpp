#pragma once
// The writes of one decided batch as one statement: every table's new rows
// inserted and changed rows updated by data-modifying CTEs over one array
// parameter per column, so a batch's writes cost one statement whatever
// commands it holds.
#include <optional>
#include <string_view>

#include "account_shard/ledger/decide.hpp"
#include "common/pg/connection.hpp"

namespace tally::shard {

// Its text (the same for every batch, so it is prepared once per
// connection).
std::string_view sql_write_batch();

// The statement that writes every dirty row of `st`, or none when no row
// is dirty. A table without rows to write gets empty arrays; each update
// checks the rows it changed (expect_rows), which aborts the transaction on
// any other count.
std::optional<pg::statement> write_statement(const batch_state& st);

}  // namespace tally::shard
