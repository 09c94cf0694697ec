#pragma once
// A request to start a saga (API.md bodies plus the caller's tenant),
// validated once, where it enters the system: field by field, with the
// request hash that saga idempotency compares. Its canonical JSON is what
// the gateway forwards and the orchestrator reads back without validating
// again.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/saga_type.hpp"

namespace tally::contract {

inline constexpr std::size_t max_batch_items = 1000;
inline constexpr std::int64_t max_hold_timeout_ms = 7LL * 24 * 3600 * 1000;  // a week
inline constexpr std::int64_t max_transfer_timeout_ms = 300'000;             // five minutes

struct saga_item {
  std::string account;
  std::int64_t amount = 0;
  bool operator==(const saga_item&) const = default;
};

struct saga_request {
  saga_type type = saga_type::credit;
  std::string tenant;
  std::string biz_id;
  std::string account;      // credit, deduct; refund: the account refunded, if named
  std::string source;       // transfer: from_account
  std::string destination;  // transfer: to_account
  std::int64_t amount = 0;  // refund: 0 when not given
  std::string memo;
  std::optional<std::int64_t> expires_at;                 // credit: its lot's expiry (unix ms)
  std::string rule_version;                               // credit: its lot's rule version; empty: the default
  std::optional<std::chrono::milliseconds> hold_timeout;  // deduct: held until confirmed
  std::optional<std::chrono::milliseconds> timeout;       // transfer: the saga's deadline, from its start
  std::string original_saga_id;                           // refund
  std::vector<saga_item> items;                           // batch_deduct
  std::string request_hash;                               // hex SHA-256 of the fields above
  bool operator==(const saga_request&) const = default;
};

struct invalid_request {
  std::string message;
};

// An API body: every field checked, the first problem named.
std::variant<saga_request, invalid_request> parse_saga_request(saga_type type, std::string_view tenant,
                                                               const nlohmann::json& body);

// The accounts a request names (for per-account rate limits), in field order.
std::vector<std::string> accounts_of(const saga_request& r);

// The canonical form: a request that passed parse_saga_request, as one JSON
// object with its hash. Reading it back checks its shape only.
nlohmann::json to_canonical_json(const saga_request& r);
std::optional<saga_request> from_canonical_json(const nlohmann::json& j);

// An action on a saga (confirm, cancel, retry, abort) takes no fields: its
// body is empty or an empty JSON object, else the refusal.
std::optional<invalid_request> check_action_body(std::string_view body);

}  // namespace tally::contract
