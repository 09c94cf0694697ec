// The saga state machine's names and its one rule; the names of the
// calls' statuses and the sagas' phases.
#include "common/contract/enum_names.hpp"
#include "common/invariant/invariant.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

constexpr contract::enum_names<saga_state, 8> saga_state_names{
    {{saga_state::pending, "pending"},
     {saga_state::running, "running"},
     {saga_state::awaiting_confirmation, "awaiting_confirmation"},
     {saga_state::compensating, "compensating"},
     {saga_state::completed, "completed"},
     {saga_state::failed, "failed"},
     {saga_state::compensated, "compensated"},
     {saga_state::needs_attention, "needs_attention"}}};

static_assert(contract::names_every_value(saga_state_names));
std::string_view to_string(saga_state v) { return contract::name_of(saga_state_names, v); }

std::optional<saga_state> saga_state_from(std::string_view s) { return contract::value_of(saga_state_names, s); }

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

constexpr contract::enum_names<call_status, 7> call_status_names{{{call_status::idle, "idle"},
                                                                  {call_status::in_flight, "in_flight"},
                                                                  {call_status::waiting, "waiting"},
                                                                  {call_status::succeeded, "succeeded"},
                                                                  {call_status::rejected, "rejected"},
                                                                  {call_status::not_applied, "not_applied"},
                                                                  {call_status::applied, "applied"}}};

static_assert(contract::names_every_value(call_status_names));
std::string_view to_string(call_status v) { return contract::name_of(call_status_names, v); }

std::optional<call_status> call_status_from(std::string_view s) { return contract::value_of(call_status_names, s); }

constexpr contract::enum_names<phase, 4> phase_names{{{phase::forward, "forward"},
                                                      {phase::awaiting, "awaiting"},
                                                      {phase::compensating, "compensating"},
                                                      {phase::done, "done"}}};

static_assert(contract::names_every_value(phase_names));
std::string_view to_string(phase v) { return contract::name_of(phase_names, v); }

std::optional<phase> phase_from(std::string_view s) { return contract::value_of(phase_names, s); }

}  // namespace tally::orch
