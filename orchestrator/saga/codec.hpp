#pragma once
// A saga in JSON: its input and its engine progress as the saga store keeps
// them (exact round trip), and the public saga resource of API.md.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

// RFC 3339 UTC with milliseconds: 2026-12-01T10:00:00.123Z
std::string to_rfc3339(instant t);

nlohmann::json input_to_json(const saga_input& in);
saga_input input_from_json(const nlohmann::json& j);

// The engine's state that has no column of its own: stage, cursor, every
// call's progress, confirmation, hold deadline, how compensation ends.
nlohmann::json progress_to_json(const saga& s);
// Fills those fields of `s`; false with `error` set when `j` is not
// something progress_to_json wrote.
bool progress_from_json(const nlohmann::json& j, saga& s, std::string& error);

// The saga resource: saga_id, type, biz_id, state, input (in the public
// field names of its type), error, created_at, updated_at, deadline, and a
// summary per step.
// A refund's view adds "refunded": what it gave back so far.
nlohmann::json public_json(const saga& s, const workflow_def& w, instant updated);

// {"amount": total, "items": [{"account_id", "amount"}, ...]}
nlohmann::json refunded_json(const std::vector<saga_item>& items);
// Per item of a deduction (its account), a transfer (its source) or a
// batch deduction (each item's account): what `refunds` (every refund
// saga's refunded_by) gave back. Empty for other types.
std::vector<saga_item> refunded_of_original(const saga& original, saga_type type,
                                            const std::vector<saga_item>& refunds);

}  // namespace tally::orch
