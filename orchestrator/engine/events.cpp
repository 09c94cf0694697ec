// What each event does to a saga: a participant's answer, a wake, recovery
// after a crash, and the app's and operators' requests. Each records what
// it learnt and leaves the next move to engine::advance (engine.cpp).
#include <algorithm>

#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

void engine::note_answer(call_progress& c, const step_def& st, bool undo, const answer& a, instant now) const {
  // A call with a final status keeps it: later answers (replays of an
  // earlier attempt, or a retry answer overtaken by the real one) change
  // nothing.
  if (c.status != call_status::in_flight && c.status != call_status::waiting) return;
  if (a.kind != answer_kind::not_delivered) c.delivered = true;
  auto wait = [&](std::string code, std::chrono::milliseconds delay) {
    c.status = call_status::waiting;
    c.code = std::move(code);
    c.due = now + delay;
  };
  auto delay = [&] {
    return c.attempts >= st.retry.attempt_budget ? st.retry.max_backoff : backoff(st.retry, c.attempts, random_);
  };
  // The participant's own estimate (a busy account's queue), with up to
  // half again of jitter so that the sagas it refused together do not
  // come back together; the deadline still bounds the wait before the pivot.
  auto hinted_delay = [&](std::chrono::milliseconds hint) {
    return hint + std::chrono::milliseconds(
                      static_cast<long long>(static_cast<double>(hint.count() / 2) * std::clamp(random_(), 0.0, 1.0)));
  };
  switch (a.kind) {
    case answer_kind::succeeded:
      c.status = call_status::succeeded;
      c.code.clear();
      break;
    case answer_kind::rejected:
      c.status = call_status::rejected;
      c.code = a.code;
      break;
    case answer_kind::cancelled:
      // Forward: our own barrier fenced the key off. Undo: the barrier holds.
      c.status = undo ? call_status::succeeded : call_status::not_applied;
      c.code = undo ? "" : "cancelled";
      break;
    case answer_kind::already_applied_succeeded:
      c.status = undo ? call_status::applied : call_status::succeeded;
      c.code.clear();
      break;
    case answer_kind::already_applied_other:
      c.status = undo ? call_status::succeeded : call_status::rejected;
      c.code = undo ? "" : a.code;
      break;
    case answer_kind::retry:
      wait(a.code, a.retry_after.count() > 0 ? std::max(delay(), hinted_delay(a.retry_after)) : delay());
      break;
    case answer_kind::conflict: wait(std::string(conflict_code), st.retry.max_backoff); break;
    case answer_kind::transport: wait(a.code.empty() ? "unavailable" : a.code, delay()); break;
    case answer_kind::not_delivered: wait(a.code.empty() ? "unreachable" : a.code, delay()); break;
  }
  if (c.status != call_status::waiting) c.finished = now;
}

decision engine::start(saga& s, instant now) const {
  decision d;
  s.workflow = workflow_.name;
  s.calls.clear();
  for (const auto& st : workflow_.steps) s.calls.emplace_back(items_of(s, st));
  s.stage = phase::forward;
  move_to(s, saga_state::running);
  s.cursor = 0;
  if (s.created == instant{}) s.created = now;
  if (s.deadline == instant{}) s.deadline = s.created + workflow_.default_deadline;
  advance(s, now, d);
  return d;
}

std::vector<lot_share> engine::source_lots(const saga& s, std::size_t credit_step) const {
  if (workflow_.steps.at(credit_step).role != account_role::destination) return {};
  for (std::size_t i = 0; i < credit_step; ++i) {
    const auto& st = workflow_.steps[i];
    if (st.op == participant_op::hold && st.role == account_role::source && !s.calls.at(i).empty())
      return group_by_expiry(s.calls[i][0].lots);
  }
  return {};
}

std::vector<lot_share> group_by_expiry(const std::vector<lot_share>& shares) {
  std::vector<lot_share> out;
  for (const auto& l : shares) {
    auto same = std::find_if(out.begin(), out.end(), [&](const lot_share& o) { return o.expires_at == l.expires_at; });
    if (same == out.end())
      out.push_back(l);
    else
      same->amount += l.amount;
  }
  return out;
}

decision engine::on_answer(saga& s, const call_ref& ref, const answer& a, instant now) const {
  decision d;
  if (s.stage == phase::done || ref.step >= s.calls.size() || ref.item >= s.calls[ref.step].size()) return d;
  auto& cs = s.calls[ref.step][ref.item];
  // A hold's allocation, for the credit that re-grants it (a transfer's destination).
  if (!ref.undo && a.kind == answer_kind::succeeded && workflow_.steps[ref.step].op == participant_op::hold)
    cs.lots = a.lots;
  // What a refund gave back: its own answer, or a cancel_key's that found it applied.
  const bool applied = ref.undo ? a.kind == answer_kind::already_applied_succeeded : a.kind == answer_kind::succeeded;
  if (applied && workflow_.steps[ref.step].op == participant_op::refund) cs.amount = a.amount;
  note_answer(ref.undo ? cs.undo : cs.forward, workflow_.steps[ref.step], ref.undo, a, now);
  advance(s, now, d);
  return d;
}

decision engine::on_wake(saga& s, instant now) const {
  decision d;
  if (s.stage != phase::done) advance(s, now, d);
  return d;
}

decision engine::recover(saga& s, instant now) const {
  auto unknown = [&](call_progress& p) {
    p.status = call_status::waiting;
    p.delivered = true;  // it may have been sent before the crash
    p.code = "recovered";
    p.due = now;
  };
  for (auto& step : s.calls)
    for (auto& c : step)
      for (auto* p : {&c.forward, &c.undo})
        if (p->status == call_status::in_flight) unknown(*p);
  // Calls of the steps up to the pivot that are sent before their state is
  // saved, and not settled in this state, may have gone out since,
  // unrecorded (a first attempt, or a resend of a call saved as waiting):
  // going forward re-sends them with their keys; compensating fences them
  // off first.
  if (s.stage == phase::forward && !past_pivot(s))
    for (std::size_t i = 1; i <= workflow_.pivot_index() && workflow_.sendable_before_saving(i); ++i)
      for (auto& c : s.calls.at(i))
        if (c.forward.status == call_status::idle || c.forward.status == call_status::waiting) unknown(c.forward);
  return on_wake(s, now);
}

namespace {
bool awaits_confirmation(const workflow_def& w) {
  return std::any_of(w.steps.begin(), w.steps.end(), [](const step_def& st) { return st.await_confirmation; });
}
}  // namespace

engine::request_result engine::confirm(saga& s, instant now, decision& d) const {
  if (!awaits_confirmation(workflow_)) return request_result::invalid_state;
  if (s.stage == phase::done)
    return s.state == saga_state::completed ? request_result::already : request_result::invalid_state;
  if (s.stage == phase::compensating) return request_result::invalid_state;
  if (s.confirmed) return request_result::already;
  s.confirmed = true;
  advance(s, now, d);
  return request_result::done;
}

engine::request_result engine::cancel(saga& s, instant now, decision& d) const {
  if (!awaits_confirmation(workflow_)) return request_result::invalid_state;
  if (s.stage == phase::done)
    return s.state == saga_state::compensated && s.error && s.error->code == "cancelled"
               ? request_result::already
               : request_result::invalid_state;
  if (s.stage == phase::compensating) return request_result::already;  // the hold is being released anyway
  if (s.confirmed || past_pivot(s)) return request_result::invalid_state;
  begin_compensation(s, {"cancelled", "cancelled by the app"}, saga_state::compensated);
  advance(s, now, d);
  return request_result::done;
}

engine::request_result engine::abort(saga& s, instant now, decision& d) const {
  if (s.stage == phase::done || past_pivot(s)) return request_result::invalid_state;
  if (s.stage == phase::compensating) return request_result::already;
  begin_compensation(s, {"aborted", "aborted by an operator"}, saga_state::compensated);
  advance(s, now, d);
  return request_result::done;
}

engine::request_result engine::retry_now(saga& s, instant now, decision& d) const {
  if (s.stage == phase::done) return request_result::invalid_state;
  for (auto& step : s.calls)
    for (auto& c : step) {
      if (c.forward.status == call_status::waiting) c.forward.due = now;
      if (c.undo.status == call_status::waiting) c.undo.due = now;
    }
  advance(s, now, d);
  return request_result::done;
}

}  // namespace tally::orch
