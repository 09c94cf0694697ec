#pragma once
// The shard's internal protocol (POST /v1/commands and /v1/batch): its
// commands, its replies and the codes they carry, each enum with its wire
// names in one table, and one encoder and one decoder for each message.
// The shard decodes commands and encodes replies; the orchestrator and the
// gateway encode commands and decode replies; all of them through here.
//
// Rolling upgrades: a decoder refuses a status, kind or code it does not
// know (a reply it cannot read is no answer, and the call is asked again),
// so a new code ships to the orchestrators and gateways before the shards.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/enum_names.hpp"
#include "common/contract/errors.hpp"

namespace tally::contract {

TALLY_NAMED_ENUM(shard_command_kind, open_account, credit, debit, hold, capture, release, refund, cancel_key, expire);
constexpr std::optional<shard_command_kind> shard_command_kind_from(std::string_view s) {
  return value_of(shard_command_kind_names, s);
}

// Why a command was rejected (stored with its key), not decided now
// (retry), refused as a conflict, or not answered (unavailable).
TALLY_NAMED_ENUM(shard_code, account_not_found, account_closed,
                 account_frozen,  // retry: an operator froze the account
                 insufficient_funds, balance_overflow,
                 original_not_found,  // retry: a refund's original is not (yet) stored
                 original_not_succeeded, refund_exceeds_original,
                 lot_not_due,     // retry: an expire before its lot's time
                 hold_not_found,  // retry: a capture before its hold
                 hold_released, hold_captured, capture_exceeds_hold,
                 idempotency_conflict,  // conflict: the key was used with other content
                 unavailable,           // unavailable: nothing was decided
                 outcome_unknown,       // unavailable: the commit's outcome is unknown; resend the same key
                 account_busy);         // unavailable: refused by hot-account admission, retry after retry_after_ms
// The codes the shard shares with the public API are spelt as the API spells them.
static_assert(to_string(shard_code::idempotency_conflict) == to_string(error_code::idempotency_conflict) &&
              to_string(shard_code::unavailable) == to_string(error_code::unavailable) &&
              to_string(shard_code::account_busy) == to_string(error_code::account_busy));
constexpr std::optional<shard_code> shard_code_from(std::string_view s) { return value_of(shard_code_names, s); }

// A stored operation's outcome.
TALLY_NAMED_ENUM(operation_state, succeeded, rejected, cancelled);
constexpr std::optional<operation_state> operation_state_from(std::string_view s) {
  return value_of(operation_state_names, s);
}

// How the shard answered one command.
TALLY_NAMED_ENUM(shard_reply_status,
                 succeeded,        // the effect happened (now or before: replayed)
                 rejected,         // a terminal business rejection, stored for the key
                 conflict,         // the key was used with other content; nothing changed
                 cancelled,        // the key is tombstoned by cancel_key
                 already_applied,  // cancel_key found the key's effect already applied
                 retry,            // not decided now (nothing stored): resend the same key later
                 unavailable);     // not answered (a batch's command): see the code

// A lot a credit grants, or a part of a lot a reply names (lot_id: a
// reply's only; 0 in a command).
struct lot_part {
  std::int64_t lot_id = 0;
  std::int64_t amount = 0;
  std::optional<std::int64_t> expires_at;  // unix ms; none: never expires
  std::string rule_version;
  bool operator==(const lot_part&) const = default;
};

struct shard_command {
  shard_command_kind kind = shard_command_kind::credit;
  std::string tenant;
  std::string account_id;
  // credit/debit/refund: the operation's id. hold/capture/release: the hold's id.
  // open_account: optional (the shard takes "open"). cancel_key: unused.
  // expire: the lot's id (decimal), as the expiry job sends it.
  std::string biz_id;
  std::int64_t amount = 0;  // capture: 0 means "the whole hold"; refund: "what is left"
  std::string target_type;  // refund: original_type, "debit" or "capture"; cancel_key: the cancelled command's type
  std::string target_id;    // refund: original_id; cancel_key: the cancelled biz_id
  std::string memo;         // credit, debit, hold
  // credit: the lot(s) it grants. One lot expiring at `expires_at` (none:
  // never) with `rule_version` (empty: not given, the default "1"); or,
  // when `lots` is given (a transfer's destination), one lot per element,
  // whose amounts add up to `amount`.
  std::optional<std::int64_t> expires_at;
  std::string rule_version;
  std::vector<lot_part> lots;
  bool operator==(const shard_command&) const = default;
};

// The rule version a credit's single lot gets.
inline constexpr std::string_view default_rule_version = "1";
inline constexpr std::size_t max_credit_lots = 100;

// The command that opens an account (if it is not open yet).
shard_command open_account_command(std::string tenant, std::string account_id);

// One command of a batch, or the body of POST /v1/commands.
nlohmann::json to_json(const shard_command& c);
// Every field checked (ids [A-Za-z0-9._:-]{1,64}, 1 <= amount <= 10^15,
// known kind, no field the kind does not take, times RFC 3339 UTC): the
// command, or the first problem. A credit's expiry may lie in the past: a
// transfer carries its source's expiries.
std::variant<shard_command, std::string> parse_shard_command(const nlohmann::json& j);

// An expire's biz_id as a lot id: a positive decimal without leading zeros.
std::optional<std::int64_t> lot_id_of(std::string_view biz_id);

// cancel_key's finding: the outcome stored for the key.
struct applied_outcome {
  operation_state state = operation_state::succeeded;
  std::int64_t amount = 0;
  std::optional<shard_code> code;
  bool operator==(const applied_outcome&) const = default;
};

struct shard_reply {
  shard_reply_status status = shard_reply_status::succeeded;
  std::optional<shard_code> code;  // rejection, retry, conflict or unavailable reason
  shard_command_kind kind = shard_command_kind::credit;
  std::string biz_id;
  bool replayed = false;
  std::int64_t amount = 0;
  std::int64_t balance_after = 0;
  std::int64_t held_after = 0;
  std::int64_t version = 0;
  std::optional<std::int64_t> ledger_seq;
  std::optional<applied_outcome> applied;  // already_applied
  std::vector<lot_part> lots;              // succeeded: the lots the command granted, took or held
  std::int64_t retry_after_ms = 0;         // unavailable with account_busy
  bool operator==(const shard_reply&) const = default;
};

// An unavailable reply: nothing decided (`code`: unavailable,
// outcome_unknown, or account_busy with its suggested pause).
shard_reply unavailable_reply(shard_code code, std::int64_t retry_after_ms = 0);

// A reply carries the fields its status gives: an unavailable reply only
// status, code and retry_after_ms; a conflict or retry also the command and
// biz_id; a cancelled one also replayed; the rest every figure.
std::string to_json_text(const shard_reply& r);
// The reply, or why it is not one (not an object, an unknown status, kind
// or code, a field of the wrong type).
std::variant<shard_reply, std::string> parse_shard_reply(const nlohmann::json& j);

}  // namespace tally::contract
