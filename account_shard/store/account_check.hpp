#pragma once
// Checking a set of accounts against their ledger, lots and holds, read in
// one snapshot: what an incremental reconciliation and each page of a full
// audit do (store/reconciliation.cpp, store/audits.cpp). The reads probe
// each account by key (an array of tenants and one of account ids), so a
// check costs what its accounts hold, never a scan of a table; the rows are
// joined in memory.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "account_shard/ledger/reconcile.hpp"
#include "common/pg/connection.hpp"

namespace tally::shard {

using account_key = std::pair<std::string, std::string>;  // (tenant, account id)

enum class check_kind {
  // From each account's checkpoint: the entries after it, the lots that
  // hold value, the open holds (read for the whole scope: they are few),
  // the lot parts of the operations written since.
  since_checkpoint,
  // From each account's first entry: every lot with every operation that
  // names it, every hold, every expire entry.
  whole_history,
};

// The accounts to check, in (tenant, account id) order.
struct account_set {
  std::vector<std::string> tenants, accounts;
  void add(std::string tenant, std::string account) {
    tenants.push_back(std::move(tenant));
    accounts.push_back(std::move(account));
  }
  std::size_t size() const { return accounts.size(); }
};

// What a check read, in one snapshot: per account its row, its ledger
// (rebuilt up to the watermark, Σ after it, has opening, repeated keys,
// last entry up to the watermark, then its checkpoint), its open holds, its
// lots and what names them. A full reconciliation fills it from statements
// of its own (store/account_check_statements.hpp) with `checkpoints` read
// apart.
struct run_reads {
  pg::result accounts, ledger, checkpoints, open_holds, lots, lot_parts, held_parts, expire_entries, allocations;
  bool history_read = true;           // lot_parts and expire_entries were read
  bool checkpoints_in_ledger = true;  // the ledger rows' last three columns
};

// A check's snapshot, and its default watermark: the newest entry in it.
inline constexpr std::string_view sql_check_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
inline constexpr std::string_view sql_max_seq = "SELECT coalesce(max(seq), 0) FROM ledger_entry";
enum class max_seq_col { seq };

// The statements of a check of `set` at watermark `w` (`tenant`: the
// scope, for the reads over the scope's open holds), in the order
// reads_of() takes their results.
std::vector<pg::statement> check_statements(const account_set& set, std::int64_t w, check_kind kind,
                                            const std::optional<std::string>& tenant);
run_reads reads_of(std::vector<pg::result> results, check_kind kind);
// The open holds of the scope and their parts per lot (few at any time:
// read whole, through the hold_open index).
pg::statement scope_open_holds(const std::optional<std::string>& tenant);
pg::statement scope_held_parts(const std::optional<std::string>& tenant);

// The checkpoints a check leaves, as the arrays its statement takes.
struct checkpoint_writes {
  std::vector<std::string> tenants, accounts;
  std::vector<std::int64_t> seqs, balances;
  std::vector<std::string> clean;  // "t" or "f"
  void add(const account_key& key, const checkpoint& c);
  pg::statement statement() const;  // upserts them
};

struct check_result {
  std::int64_t accounts = 0;
  std::vector<account_reconciliation> differing;
  checkpoint_writes checkpoints;
};

// Compares every account read with its ledger, holds and lots; reads the
// entries of those that differ (on `conn`, in the same snapshot) to
// classify them.
boost::asio::awaitable<pg::error> check_accounts(pg::connection& conn, const run_reads& in, std::int64_t w,
                                                 std::chrono::milliseconds timeout, check_result& out);

}  // namespace tally::shard
