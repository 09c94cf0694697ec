// The saga state machine's one rule.
#include "common/invariant/invariant.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

bool is_terminal(saga_state s) {
  return s == saga_state::completed || s == saga_state::failed || s == saga_state::compensated;
}

bool may_move(saga_state from, saga_state to) {
  if (from == to) return true;
  return !is_terminal(from) && to != saga_state::pending;
}

void move_to(saga& s, saga_state to) {
  TALLY_ASSERT(may_move(s.state, to), s.id, to_string(s.state), to_string(to));
  s.state = to;
}

}  // namespace tally::orch
