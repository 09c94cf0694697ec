#pragma once
// A request to start a saga, as the gateway passes it on (API.md bodies plus
// the caller's tenant): validated field by field, mapped to its workflow and
// input, with the request hash that saga idempotency compares.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json_fwd.hpp>

#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

inline constexpr std::size_t max_batch_items = 1000;
inline constexpr std::int64_t max_hold_timeout_ms = 7LL * 24 * 3600 * 1000;  // a week
inline constexpr std::int64_t max_transfer_timeout_ms = 300'000;             // five minutes

struct saga_request {
  saga_type type = saga_type::credit;
  // The workflow to run. A refund names "refund" until its original is
  // looked up (resolve_refund).
  std::string workflow;
  std::string tenant;
  std::string biz_id;
  saga_input input;
  std::optional<std::chrono::milliseconds> timeout;  // the saga's deadline, from its start
  std::string request_hash;                          // hex SHA-256 of the semantic fields
};

struct invalid_request {
  std::string message;
};

std::variant<saga_request, invalid_request> parse_saga_request(saga_type type, std::string_view tenant,
                                                               const nlohmann::json& body);

// Why a refund cannot start against its original (nothing is written).
struct refund_refusal {
  enum class reason { not_found, invalid, invalid_state } why = reason::invalid;
  std::string message;
};

// Maps a refund onto its original, a saga of the same tenant: the workflow
// and the accounts and shard keys its calls name. A deduction's or a
// transfer's refund needs an amount (and may name the account refunded); a
// batch deduction's names one item's account (its amount, or none for what
// is left of it) or none, and then gives back what is left of every item.
std::optional<refund_refusal> resolve_refund(saga_request& r, const saga& original, saga_type original_type);

// An action on a saga (confirm, cancel, retry, abort) takes no fields: its
// body is empty or an empty JSON object, else the refusal.
std::optional<invalid_request> check_action_body(std::string_view body);

}  // namespace tally::orch
