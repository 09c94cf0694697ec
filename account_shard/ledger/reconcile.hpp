#pragma once
// Reconciliation of one account at a ledger watermark W, free of I/O.
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
};

// The lot_mismatch findings of one lot.
void find_lot_mismatches(const lot_view& lot, std::vector<finding>& out);

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
