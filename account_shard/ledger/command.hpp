#pragma once
// The shard's commands as values: parsed and validated from JSON, with the
// business key they are idempotent on and the request hash of their
// semantic fields.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "account_shard/ledger/lots.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

enum class command_kind { open_account, credit, debit, hold, capture, release, refund, cancel_key, expire };

std::string_view to_string(command_kind k);
std::optional<command_kind> command_kind_from(std::string_view name);
// An expire's biz_id as a lot id: a positive decimal without leading zeros.
std::optional<std::int64_t> lot_id_of(std::string_view biz_id);

using validate::max_amount;  // 10^15

// (tenant, account, biz_type, biz_id): names one effect forever.
struct op_key {
  std::string tenant;
  std::string account_id;
  std::string biz_type;
  std::string biz_id;
  std::string flat() const;                         // a map key
  auto operator<=>(const op_key&) const = default;  // byte order, as the tables' COLLATE "C"
};

struct command {
  command_kind kind = command_kind::credit;
  std::string tenant;
  std::string account_id;
  // credit/debit/refund: the operation's id. hold/capture/release: the hold's id.
  // open_account: optional (defaults to "open"). cancel_key: unused.
  // expire: the lot's id (decimal), as the expiry job sends it.
  std::string biz_id;
  std::int64_t amount = 0;  // capture: 0 means "the whole hold"; refund: "what is left"
  std::string target_type;  // refund: "debit" or "capture"; cancel_key: the cancelled biz_type
  std::string target_id;    // refund: the original biz_id; cancel_key: the cancelled biz_id
  std::string memo;
  // credit: the lot(s) it grants. One lot expiring at `expires_at` (none:
  // never) with `rule_version`; or, when `lots` is given (a transfer's
  // destination), one lot per element, whose amounts add up to `amount`.
  std::optional<std::int64_t> expires_at;
  std::string rule_version = "1";
  std::vector<lot_part> lots;
  std::string request_hash;  // hex SHA-256 of the semantic fields

  // The key this command is idempotent on. cancel_key acts on its target's key.
  op_key key() const;
  // refund: the original operation's key.
  op_key target_key() const;
};

struct invalid_command {
  std::string message;
};

// Validates every field (ids [A-Za-z0-9._:-]{1,64}, 1 <= amount <= 10^15,
// known command, no unknown fields, times RFC 3339 UTC) and computes the
// request hash. A credit's expiry may lie in the past here: a transfer
// carries its source's expiries, and a lot granted already expired is
// expired by the next run of the job (the public API refuses past ones).
std::variant<command, invalid_command> parse_command(const nlohmann::json& j);
using validate::is_valid_id;
std::string request_hash(const command& c);

}  // namespace tally::shard
