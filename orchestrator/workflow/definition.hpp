#pragma once
// Saga types as data. Each workflow is an ordered list of steps; one engine
// (orchestrator/engine/engine.hpp) interprets every workflow, so a new saga
// type is a new definition, not new control flow. Operators read these
// definitions through the admin API.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/enum_names.hpp"
#include "common/contract/saga_type.hpp"
#include "common/contract/shard_protocol.hpp"

namespace tally::orch {

// The public saga types (API.md). A type may have several workflows: a
// deduction is immediate or held, a refund is of a deduction, a transfer or
// the items of a batch deduction.
using contract::all_saga_types;
using contract::saga_type;
using contract::saga_type_from;

// The shard command a step sends: the kinds of the shard protocol that a
// saga may send, named as the protocol names them.
enum class participant_op { credit, debit, hold, capture, release, refund, cancel_key };
constexpr contract::shard_command_kind shard_kind_of(participant_op op) {
  using k = contract::shard_command_kind;
  switch (op) {
    case participant_op::credit: return k::credit;
    case participant_op::debit: return k::debit;
    case participant_op::hold: return k::hold;
    case participant_op::capture: return k::capture;
    case participant_op::release: return k::release;
    case participant_op::refund: return k::refund;
    case participant_op::cancel_key: return k::cancel_key;
  }
  return k::credit;
}
constexpr std::string_view to_string(participant_op op) { return contract::to_string(shard_kind_of(op)); }

// Which of the saga's accounts a step acts on.
TALLY_NAMED_ENUM(account_role, account, source, destination, each_item);

// How a step is undone, or settled when its outcome is not known.
TALLY_NAMED_ENUM(undo_kind,
                 none,         // forward only: the step comes at or after the point of no return
                 release,      // a hold: release it; before the hold arrives, a tombstone refuses it
                 cancel_key);  // an effect: tombstone its key, or learn that it already applied

struct retry_policy {
  std::chrono::milliseconds call_timeout{2000};  // no answer by then: outcome unknown, resend the same key
  std::chrono::milliseconds initial_backoff{25};
  std::chrono::milliseconds max_backoff{5000};
  int attempt_budget = 10;  // then needs_attention; retries go on every max_backoff
};

struct step_def {
  std::string name;
  participant_op op = participant_op::credit;
  account_role role = account_role::account;
  undo_kind undo = undo_kind::none;
  // The point of no return. Once a pivot has succeeded (or, for a pivot
  // that cannot be undone, once it has been sent) the saga only goes forward.
  bool pivot = false;
  // After this step the saga waits for the app's confirm or cancel.
  bool await_confirmation = false;
  retry_policy retry;
};

struct workflow_def {
  std::string name;  // "transfer", "deduct_held", ...
  saga_type type = saga_type::credit;
  std::string description;
  std::vector<step_def> steps;
  std::chrono::milliseconds default_deadline{10000};

  // Index of the pivot step (every built-in workflow has one).
  std::size_t pivot_index() const;
  // Whether a step's calls may be sent before the saga state that sends
  // them is durable. The first step never: it goes out once the saga's
  // creation is durable. Up to the pivot, when every step so far can be
  // undone and none waits for the app: whoever recovers the saga from an
  // older state re-sends what it knows was in flight and then the next
  // steps with the same keys (same stored outcomes), and should it
  // compensate instead, it fences off every such step it does not know the
  // fate of (engine::recover) — a release's tombstone, a cancelled key.
  // After the pivot, a forward-only step: whoever recovers re-sends the
  // pivot and then this step, and never compensates either.
  bool sendable_before_saving(std::size_t step) const;
};

// Every built-in workflow, in a fixed order.
const std::vector<workflow_def>& workflows();
// nullptr when there is no such workflow.
const workflow_def* find_workflow(std::string_view name);

void to_json(nlohmann::json& j, const workflow_def& w);

}  // namespace tally::orch
