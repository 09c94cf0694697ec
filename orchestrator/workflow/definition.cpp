#include "orchestrator/workflow/definition.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tally::orch {

bool workflow_def::sendable_before_saving(std::size_t step) const {
  if (step == 0 || step >= steps.size()) return false;  // the first step goes out with the saga's creation
  const auto pivot = pivot_index();
  if (step > pivot) return steps[step].undo == undo_kind::none;
  return std::all_of(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(pivot) + 1,
                     [](const step_def& st) { return st.undo != undo_kind::none && !st.await_confirmation; });
}

std::size_t workflow_def::pivot_index() const {
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (steps[i].pivot) return i;
  throw std::logic_error("workflow " + name + " has no pivot");
}

namespace {

step_def step(std::string name, participant_op op, account_role role, undo_kind undo, bool pivot = false,
              bool await_confirmation = false) {
  step_def s;
  s.name = std::move(name);
  s.op = op;
  s.role = role;
  s.undo = undo;
  s.pivot = pivot;
  s.await_confirmation = await_confirmation;
  return s;
}

std::vector<workflow_def> built_in() {
  using op = participant_op;
  using role = account_role;
  using undo = undo_kind;
  std::vector<workflow_def> w;
  w.push_back({"credit",
               saga_type::credit,
               "Credit one account.",
               {step("credit_account", op::credit, role::account, undo::cancel_key, true)}});
  w.push_back({"deduct",
               saga_type::deduct,
               "Debit one account at once.",
               {step("debit_account", op::debit, role::account, undo::cancel_key, true)}});
  w.push_back({"deduct_held",
               saga_type::deduct,
               "Hold the amount, wait for the app's confirm (capture) or cancel (release); release at the hold "
               "timeout.",
               {step("hold_account", op::hold, role::account, undo::release, false, true),
                step("capture_account", op::capture, role::account, undo::none, true)}});
  w.push_back({"refund",
               saga_type::refund,
               "Credit a completed deduction's account back, referencing its debit or capture; cumulative refunds "
               "never exceed the original.",
               {step("refund_account", op::refund, role::account, undo::cancel_key, true)}});
  w.push_back({"refund_transfer",
               saga_type::refund,
               "Move value of a completed transfer back: hold it on the destination, refund the source against the "
               "original capture, capture the destination's hold.",
               {step("hold_destination", op::hold, role::destination, undo::release),
                step("refund_source", op::refund, role::source, undo::cancel_key, true),
                step("capture_destination", op::capture, role::destination, undo::none)}});
  w.push_back({"revoke_items",
               saga_type::refund,
               "Give back what is left of every item of a completed batch deduction, each refund against its "
               "item's capture. Forward only: a refund cannot be taken back, so a refused item needs an operator.",
               {step("refund_items", op::refund, role::each_item, undo::none, true)},
               std::chrono::milliseconds(30000)});
  w.push_back({"transfer",
               saga_type::transfer,
               "Hold the source, credit the destination (the pivot), capture the source. Before the pivot a "
               "rejection or the deadline compensates: cancel_key on the credit, then release the hold.",
               {step("hold_source", op::hold, role::source, undo::release),
                step("credit_destination", op::credit, role::destination, undo::cancel_key, true),
                step("capture_source", op::capture, role::source, undo::none)}});
  w.push_back({"batch_deduct",
               saga_type::batch_deduct,
               "Hold every item's amount; when all are held capture them all, else release every hold: all or "
               "nothing.",
               {step("hold_items", op::hold, role::each_item, undo::release),
                step("capture_items", op::capture, role::each_item, undo::none, true)},
               std::chrono::milliseconds(30000)});
  return w;
}

}  // namespace

const std::vector<workflow_def>& workflows() {
  static const std::vector<workflow_def> all = built_in();
  return all;
}

const workflow_def* find_workflow(std::string_view name) {
  for (const auto& w : workflows())
    if (w.name == name) return &w;
  return nullptr;
}

void to_json(nlohmann::json& j, const workflow_def& w) {
  auto steps = nlohmann::json::array();
  for (const auto& s : w.steps) {
    steps.push_back({{"name", s.name},
                     {"command", to_string(s.op)},
                     {"account", to_string(s.role)},
                     {"compensation", to_string(s.undo)},
                     {"pivot", s.pivot},
                     {"await_confirmation", s.await_confirmation},
                     {"timeout_ms", s.retry.call_timeout.count()},
                     {"retry",
                      {{"initial_backoff_ms", s.retry.initial_backoff.count()},
                       {"max_backoff_ms", s.retry.max_backoff.count()},
                       {"attempt_budget", s.retry.attempt_budget}}}});
  }
  j = {{"name", w.name},
       {"type", to_string(w.type)},
       {"description", w.description},
       {"default_deadline_ms", w.default_deadline.count()},
       {"steps", std::move(steps)}};
}

}  // namespace tally::orch
