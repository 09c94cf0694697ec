#pragma once
// Grant lots, free of I/O. Every credit grants one lot (or, for a
// transfer's destination, one per expiry it carries); every debit path
// takes value from lots in one stable order: earliest expiry first,
// non-expiring last, ties by grant order (the lot id). These functions
// decide which lot gives or takes how much; decide.cpp applies them.
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/contract/enum_names.hpp"
#include "common/contract/shard_protocol.hpp"

namespace tally::shard {

// Whether a + b (b >= 0) passes the largest amount a balance or lot holds.
inline bool add_overflows(std::int64_t a, std::int64_t b) { return a > std::numeric_limits<std::int64_t>::max() - b; }

TALLY_NAMED_ENUM(lot_state, open, exhausted, expired);
std::optional<lot_state> lot_state_from(std::string_view s);

// How a lot came to be.
TALLY_NAMED_ENUM(lot_origin, grant, transfer, refund, migration);
std::optional<lot_origin> lot_origin_from(std::string_view s);

struct lot_row {
  std::string tenant;
  std::string account_id;
  std::int64_t lot_id = 0;  // 1, 2, ... per account, in grant order
  std::int64_t granted = 0;
  std::int64_t remaining = 0;              // part of the balance; includes what is held
  std::int64_t held = 0;                   // part of remaining that holds reserve
  std::int64_t expired = 0;                // what left the balance by expiry
  std::optional<std::int64_t> expires_at;  // unix ms; none: never expires
  std::string rule_version = "1";
  lot_origin origin = lot_origin::grant;
  std::optional<std::int64_t> grace_ms;  // refund lots: refund.expired_lot_grace applied
  std::string source_type;               // the operation that granted it
  std::string source_id;
  lot_state state = lot_state::open;
  bool dirty = false;
  bool is_new = false;

  std::int64_t available() const { return remaining - held; }
  // Whether its expiry has come: from then on nothing is taken from it.
  bool due_at(std::int64_t now_ms) const { return expires_at && *expires_at <= now_ms; }
  // Whether a debit may take from it now.
  bool usable_at(std::int64_t now_ms) const { return state == lot_state::open && !due_at(now_ms) && available() > 0; }
};

// The consumption order.
bool consumed_before(const lot_row& a, const lot_row& b);

// One lot's share of an operation: what it granted to, took from or held
// in that lot (always positive; the operation's type gives the direction).
// The protocol's lot part: replies name the parts.
using lot_part = contract::lot_part;

// Takes `amount` from the lots usable at `now_ms`, in consumption order;
// nullopt when together they hold less. `lots` may be in any order.
std::optional<std::vector<lot_part>> allocate(std::span<const lot_row* const> lots, std::int64_t amount,
                                              std::int64_t now_ms);

// A capture of `take` from a hold: the earliest parts of the hold's
// allocation are consumed, the rest released back to their lots.
struct capture_split {
  std::vector<lot_part> consumed;
  std::vector<lot_part> released;
};
capture_split split_capture(const std::vector<lot_part>& held, std::int64_t take);

// Where a refund of `amount` goes: back to the lots the original consumed
// (`consumed`, in consumption order), most recently consumed first, past
// the `already_refunded` units that earlier refunds returned the same way.
std::vector<lot_part> refund_parts(const std::vector<lot_part>& consumed, std::int64_t already_refunded,
                                   std::int64_t amount);

// The stored form of an operation's parts: [[lot_id, amount, expires_at_ms|null, rule_version], ...].
std::string lots_json(const std::vector<lot_part>& parts);
std::vector<lot_part> lots_from_json(std::string_view text);

}  // namespace tally::shard
