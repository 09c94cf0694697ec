#pragma once
// Reconciliation of one account at a ledger watermark W, free of I/O.
// A full run rebuilds from the first entry; an incremental one from the
// account's checkpoint (the end of its last clean check).
// The snapshot (the recorded balance as of W: today's balance minus the
// entries after W) is compared with the rebuilt balance (Σ entries with
// seq <= W, the opening entry included). The difference is classified:
//   duplicate        one business key with more than one entry (counted)
//   reversal         a legitimate reversing entry (reported, not counted)
//   missing_opening  the ledger has no opening entry (baseline to record)
//   unexplained      what the classes above do not account for
//   held_mismatch    held differs from the sum of open holds
//   lot_mismatch     the account's lots disagree with it or with the
//                    operations: Σ remaining ≠ balance, Σ held ≠ held, a
//                    lot's figures ≠ what the operations naming it add up
//                    to, an operation's lot parts ≠ its ledger entry, an
//                    expired lot without exactly one expire entry
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tally::shard {

struct entry_view {
  std::int64_t seq = 0;
  std::string biz_type;
  std::string biz_id;
  std::int64_t delta = 0;
  std::optional<std::int64_t> reverses;
};

struct finding {
  std::string kind;  // duplicate, reversal, missing_opening, unexplained, held_mismatch
  std::int64_t amount = 0;
  std::string biz_type;
  std::string biz_id;
  std::optional<std::int64_t> seq;
};

// One lot beside what the operations that name it add up to.
struct lot_view {
  std::int64_t lot_id = 0;
  std::int64_t remaining = 0;
  std::int64_t held = 0;
  std::int64_t expired = 0;
  bool is_expired = false;          // state expired
  std::int64_t ops_remaining = 0;   // Σ granted and returned − Σ taken, over the operations
  std::int64_t holds_held = 0;      // Σ of the open holds' parts in it
  std::int64_t expire_entries = 0;  // ledger entries (expire, lot id)
  std::int64_t expired_by_ops = 0;  // Σ of the expire operations' parts in it
  // False in an incremental run, which reads an account's open lots and
  // open holds but not every operation that ever named a lot: only held
  // is checked then (ops_remaining, expire_entries and expired_by_ops are
  // not read).
  bool history_read = true;
};

// The lot_mismatch findings of one lot.
void find_lot_mismatches(const lot_view& lot, std::vector<finding>& out);

// Where an account's last clean check ended (account_checkpoint): its last
// ledger entry then and the sum of its entries up to it. An incremental
// run adds the entries after `seq` to `balance`.
struct checkpoint {
  std::int64_t seq = 0;
  std::int64_t balance = 0;
  bool clean = false;  // false: the account differed at its last check
};

// The checkpoint a run leaves: a clean account's ends at its last entry up
// to the watermark, `last_seq` (not the watermark: an entry of the account
// in a batch still committing has a number above every entry of the
// account already committed, but may have one below the watermark), with
// the rebuilt balance; a differing account keeps its last clean checkpoint
// and is marked to be checked again. A clean checkpoint never moves back
// (a full run at an older watermark).
checkpoint next_checkpoint(const checkpoint& previous, bool agrees, std::int64_t last_seq, std::int64_t rebuilt);

struct account_reconciliation {
  std::string tenant;
  std::string account_id;
  std::int64_t snapshot = 0;                // recorded balance as of W
  std::int64_t rebuilt = 0;                 // opening + Σ entries ≤ W
  std::int64_t difference = 0;              // rebuilt - snapshot
  std::int64_t writes_after_watermark = 0;  // Σ deltas after W, counted apart
  std::vector<finding> findings;
  bool needs_freeze() const;
};

// `entries`: the account's entries with seq <= W, in seq order.
account_reconciliation reconcile_account(std::string tenant, std::string account_id, std::int64_t snapshot,
                                         std::int64_t writes_after_watermark, std::int64_t held,
                                         std::int64_t open_holds, const std::vector<entry_view>& entries,
                                         std::vector<finding> lot_findings = {});

nlohmann::json to_json(const account_reconciliation& r);

// How many findings of each class a run found: {"duplicate": 2, ...}.
nlohmann::json class_counts(const std::vector<account_reconciliation>& differing);

}  // namespace tally::shard
