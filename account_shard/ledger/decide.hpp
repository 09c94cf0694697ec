#pragma once
// The shard's decisions, free of I/O. A batch's rows are read under lock
// into a batch_state; each command is decided in sequence against it (so a
// later command sees an earlier one's effect); the state then says exactly
// which rows to write. Deterministic: the same state and commands give the
// same replies and writes.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "account_shard/ledger/command.hpp"
#include "account_shard/ledger/lots.hpp"

namespace tally::shard {

TALLY_NAMED_ENUM(account_status, active, frozen, closed);
std::optional<account_status> account_status_from(std::string_view s);

struct account_row {
  std::string tenant;
  std::string account_id;
  std::int64_t balance = 0;
  std::int64_t held = 0;
  account_status status = account_status::active;
  std::int64_t version = 0;
  bool dirty = false;          // to be written
  bool is_new = false;         // opened in this batch
  std::int64_t lot_count = 0;  // lots granted so far: the next lot's id is lot_count + 1
};

// The stored idempotency record of one key.
using op_state = contract::operation_state;
using contract::operation_state_from;
using contract::shard_code;

struct operation_row {
  op_key key;
  std::string request_hash;
  op_state state = op_state::succeeded;
  std::int64_t amount = 0;
  std::optional<shard_code> reason;  // rejected: why
  std::int64_t balance_after = 0;
  std::int64_t held_after = 0;
  std::int64_t version_after = 0;
  std::optional<std::int64_t> ledger_seq;
  std::int64_t refunded = 0;  // debits and captures: refunded so far
  // The lots it granted to (credit, refund), took from (debit, capture,
  // expire) or held in (hold), in consumption order.
  std::vector<lot_part> lots;
  bool is_new = false;
  bool dirty = false;
};

TALLY_NAMED_ENUM(hold_state, held, captured, released);
std::optional<hold_state> hold_state_from(std::string_view s);

struct hold_row {
  std::string tenant;
  std::string account_id;
  std::string hold_id;
  std::int64_t amount = 0;
  std::int64_t captured = 0;
  hold_state state = hold_state::held;
  bool dirty = false;
  bool is_new = false;
};

struct ledger_row {
  std::int64_t seq = 0;
  op_key key;
  std::int64_t delta = 0;
  std::int64_t balance_after = 0;
  std::optional<std::int64_t> reverses;
};

struct event_row {
  std::string tenant;
  std::string account_id;
  std::int64_t version = 0;
  std::string event_type;  // account.opened, account.credited, ...
  std::string payload;     // JSON text
};

// How the shard answered one command.
using reply_status = contract::shard_reply_status;
using reply = contract::shard_reply;

class batch_state {
 public:
  std::unordered_map<std::string, account_row> accounts;      // tenant\x1faccount
  std::unordered_map<std::string, operation_row> operations;  // op_key::flat()
  std::unordered_map<std::string, hold_row> holds;            // tenant\x1faccount\x1fhold_id
  std::vector<ledger_row> ledger;
  std::vector<event_row> events;
  // Every open lot of each account in the batch, and the lots that its
  // holds and refunds' originals name; by account_key.
  std::unordered_map<std::string, std::vector<lot_row>> lots;
  std::vector<std::int64_t> free_seqs;  // ledger sequence numbers reserved for this batch, ascending
  std::size_t next_seq = 0;
  std::int64_t now_ms = 0;  // the shard's clock when the batch was read: decides which lots are due
  std::int64_t refund_grace_ms = 7LL * 24 * 3600 * 1000;  // refund.expired_lot_grace

  static std::string account_key(std::string_view tenant, std::string_view account);
  static std::string hold_key(std::string_view tenant, std::string_view account, std::string_view hold);

  // Decides one command against the state, recording every effect, and
  // asserts that the rows it changed keep their invariants.
  reply decide(const command& c);

 private:
  // The command being decided: its operation row as it is built, and its
  // account (none yet: not found, or not opened).
  struct decision {
    const command& c;
    operation_row op;
    account_row* a = nullptr;
  };
  // What each command must change together: an account's balance and
  // held, and the sums of its lots' remaining and held.
  struct figures {
    std::int64_t balance = 0;
    std::int64_t held = 0;
    std::int64_t lots_remaining = 0;
    std::int64_t lots_held = 0;
  };
  figures figures_of(const std::string& account) const;
  // TALLY_ASSERTs, after `c` was decided: its account (0 <= held <=
  // balance), each of its lots (0 <= held <= remaining, remaining +
  // expired <= granted), its hold (captured <= amount, and captured only
  // when its state is), and that the lots
  // moved as much as the account did since `before`.
  void check_invariants(const command& c, const std::string& account, const figures& before) const;
  reply decide_command(decision& d);
  // A command whose key is stored: the stored outcome, already_applied for
  // a cancel_key, or a conflict when its content differs.
  static reply replay(const command& c, const operation_row& op);
  // Records the operation with its outcome and the account's figures after it.
  reply finish(decision& d, op_state state, std::optional<shard_code> reason = std::nullopt);
  // Not decided now, nothing stored: resend the same key later.
  static reply retry(const command& c, shard_code code);
  reply decide_open_account(decision& d);
  // One per kind of command on an account that exists and is active
  // (decide_commands.cpp).
  reply decide_credit(decision& d);
  reply decide_debit(decision& d);
  reply decide_refund(decision& d);
  reply decide_expire(decision& d);
  reply decide_hold(decision& d);
  reply decide_capture(decision& d);
  reply decide_release(decision& d);

  std::int64_t take_seq();
  void record(operation_row op);
  void emit(account_row& a, std::string_view type, const command& c);
  lot_row* find_lot(const account_row& a, std::int64_t lot_id);
  // Grants `part`: a grant or a transfer's arrival adds to the account's
  // open lot on the same terms (expiry and rule version) when the batch
  // read one, so open lots grow with the terms in force, not with the
  // credits; anything else (and a refund's grace lot) is a new lot, the
  // next id of the account. Returns the part as granted.
  lot_part grant_lot(account_row& a, const lot_part& part, lot_origin origin, const command& c);
  lot_row* lot_on_same_terms(const account_row& a, const lot_part& part);
  std::optional<std::vector<lot_part>> allocate_from(const account_row& a, std::int64_t amount);
  // A hold command's allocation: the lots its hold record names.
  std::vector<lot_part> held_parts(const command& c) const;
  // Gives a refund back to the lots its original consumed (or a new lot).
  std::vector<lot_part> refund_to_lots(account_row& a, const operation_row& original, const command& c,
                                       std::int64_t amount);
  // Releases a hold's parts back to their lots; the parts of lots that
  // expired meanwhile leave the balance (returned: what expired).
  std::vector<lot_part> release_parts(account_row& a, const std::vector<lot_part>& parts);
  // The entry and record of what a release expired: key (expire, hold:<id>).
  void record_release_expiry(account_row& a, const command& c, std::vector<lot_part> expired);
};

// The account's earliest expiry still to come and what it will take (the
// open lots' unheld value at that instant); none when nothing expires.
std::pair<std::optional<std::int64_t>, std::int64_t> next_expiry_of(const std::vector<lot_row>& lots);

}  // namespace tally::shard
