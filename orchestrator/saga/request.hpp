#pragma once
// A request to start a saga, as the orchestrator runs it: the contract's
// validated request (common/contract) mapped to its workflow and input.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/saga_request.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

using contract::invalid_request;

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

// The workflow and input of a validated request.
saga_request to_saga_request(contract::saga_request r);

// An API body (the orchestrator's own API for direct callers): validated
// by the contract's parser, then mapped.
std::variant<saga_request, invalid_request> saga_request_from_body(saga_type type, std::string_view tenant,
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

}  // namespace tally::orch
