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
#include "common/contract/shard_protocol.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

using command_kind = contract::shard_command_kind;
using contract::lot_id_of;
using contract::to_string;

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

// A command as the protocol carries it, with the hash it is idempotent on.
struct command : contract::shard_command {
  std::string request_hash;  // hex SHA-256 of the semantic fields

  // The key this command is idempotent on. cancel_key acts on its target's key.
  op_key key() const;
  // refund: the original operation's key.
  op_key target_key() const;
  // credit: its single lot's rule version (the default when not given).
  std::string_view rule() const;
};

struct invalid_command {
  std::string message;
};

// The protocol's command (contract::parse_shard_command checks every
// field) with its request hash; an open_account without a biz_id takes
// "open". A credit's expiry may lie in the past here: a transfer carries
// its source's expiries, and a lot granted already expired is expired by
// the next run of the job (the public API refuses past ones).
std::variant<command, invalid_command> parse_command(const nlohmann::json& j);
using validate::is_valid_id;
std::string request_hash(const command& c);

}  // namespace tally::shard
