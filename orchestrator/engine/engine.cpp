#include "orchestrator/engine/engine.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/invariant/invariant.hpp"
#include "common/retry/backoff.hpp"

namespace tally::orch {

namespace {

// A retry answer that, before the pivot, is the business outcome rather
// than a reason to wait: the shard refuses writes to a frozen account until
// an operator steps in, and a saga does not wait for that.
constexpr std::string_view frozen_code = "account_frozen";

std::string account_of(const saga& s, const step_def& st, std::size_t item) {
  switch (st.role) {
    case account_role::account: return s.input.account;
    case account_role::source: return s.input.source;
    case account_role::destination: return s.input.destination;
    case account_role::each_item: return s.input.items.at(item).account;
  }
  return {};
}

}  // namespace

bool call_state::may_have_applied() const {
  // A call answered only "not now" may still have a duplicate on its way:
  // it is fenced off like one that might have applied.
  return forward.status == call_status::in_flight || forward.status == call_status::succeeded ||
         (forward.status == call_status::waiting && forward.delivered);
}

std::string step_key(const saga& s) { return s.id; }

std::vector<saga_item> refunded_by(const saga& refund, const workflow_def& w) {
  std::vector<saga_item> out;
  for (std::size_t i = 0; i < w.steps.size() && i < refund.calls.size(); ++i) {
    const auto& st = w.steps[i];
    if (st.op != participant_op::refund) continue;
    for (std::size_t item = 0; item < refund.calls[i].size(); ++item) {
      const auto& c = refund.calls[i][item];
      const bool applied = c.forward.status == call_status::succeeded || c.undo.status == call_status::applied;
      if (!applied) continue;
      out.push_back({account_of(refund, st, item), c.amount});
    }
  }
  return out;
}

std::chrono::milliseconds backoff(const retry_policy& p, int attempt, const random_source& random) {
  const retry::backoff doubling{p.initial_backoff, p.max_backoff};
  const long long d = retry::delay(doubling, static_cast<std::size_t>(std::max(attempt, 1) - 1)).count();
  auto half = d / 2;
  auto jitter = static_cast<long long>(static_cast<double>(d - half) * std::clamp(random(), 0.0, 1.0));
  return std::chrono::milliseconds(half + std::min(jitter, d - half));
}

// ---- the saga's accounts and calls ----

std::size_t engine::items_of(const saga& s, const step_def& st) const {
  return st.role == account_role::each_item ? s.input.items.size() : 1;
}

std::int64_t engine::amount_of(const saga& s, const step_def& st, std::size_t item) const {
  return st.role == account_role::each_item ? s.input.items.at(item).amount : s.input.amount;
}

outgoing_call engine::make_call(const saga& s, const call_ref& ref) const {
  const auto& st = workflow_.steps.at(ref.step);
  outgoing_call c;
  c.ref = ref;
  c.account = account_of(s, st, ref.item);
  const auto key = step_key(s);
  if (ref.undo) {
    if (st.undo == undo_kind::release) {
      c.op = participant_op::release;
      c.biz_id = key;
    } else {
      c.op = participant_op::cancel_key;
      c.target_type = std::string(to_string(st.op));
      c.target_id = key;
    }
    return c;
  }
  c.op = st.op;
  c.biz_id = key;
  switch (st.op) {
    case participant_op::credit:
      c.amount = amount_of(s, st, ref.item);
      c.memo = s.input.memo;
      c.expires_at = s.input.expires_at;
      c.rule_version = s.input.rule_version;
      c.lots = source_lots(s, ref.step);
      break;
    case participant_op::debit:
      c.amount = amount_of(s, st, ref.item);
      c.memo = s.input.memo;
      break;
    case participant_op::hold: c.amount = amount_of(s, st, ref.item); break;
    case participant_op::refund:
      c.amount = amount_of(s, st, ref.item);
      c.original_type = s.input.original_type;
      c.original_id = s.input.original_key;
      break;
    case participant_op::capture:  // the whole hold
    case participant_op::release:
    case participant_op::cancel_key: break;
  }
  return c;
}

void engine::send(saga& s, const call_ref& ref, instant now, decision& d) const {
  auto& cs = s.calls.at(ref.step).at(ref.item);
  auto& c = ref.undo ? cs.undo : cs.forward;
  const auto& st = workflow_.steps.at(ref.step);
  c.attempts += 1;
  if (c.attempts == 1) c.started = now;
  c.status = call_status::in_flight;
  c.due = now + st.retry.call_timeout;
  auto out = make_call(s, ref);
  out.attempt = c.attempts;
  d.send.push_back(std::move(out));
}

// ---- decisions ----

bool engine::past_pivot(const saga& s) const {
  const auto p = workflow_.pivot_index();
  if (s.stage == phase::forward && s.cursor > p) return true;
  if (s.stage == phase::done) return s.state == saga_state::completed;
  if (s.calls.size() <= p) return false;
  const auto& st = workflow_.steps[p];
  for (const auto& c : s.calls[p]) {
    if (c.forward.status == call_status::succeeded || c.undo.status == call_status::applied) return true;
    // A pivot that cannot be undone is passed as soon as it may have applied.
    if (st.undo == undo_kind::none && c.forward.attempts > 0) return true;
  }
  return false;
}

void engine::begin_compensation(saga& s, saga_error why, saga_state end) const {
  s.error = std::move(why);
  s.end_after_compensation = end;
  s.stage = phase::compensating;
  move_to(s, saga_state::compensating);
  // The walk starts at the last step that may have taken effect: the
  // current one (its calls may be in flight), or a later one a recovered
  // saga does not know the fate of (recover).
  for (std::size_t i = s.calls.size(); i-- > s.cursor + 1;) {
    if (std::any_of(s.calls[i].begin(), s.calls[i].end(), [](const call_state& c) { return c.may_have_applied(); })) {
      s.cursor = i;
      break;
    }
  }
}

void engine::finish(saga& s, saga_state end) const {
  TALLY_ASSERT(is_terminal(end), s.id, to_string(end));
  s.stage = phase::done;
  move_to(s, end);
  s.attention.clear();
  if (end == saga_state::completed) s.error.reset();
}

void engine::run_forward(saga& s, instant now, decision& d, bool& again) const {
  const auto& st = workflow_.steps.at(s.cursor);
  auto& calls = s.calls.at(s.cursor);
  const bool pivot_passed = past_pivot(s);
  if (!pivot_passed) {
    for (const auto& c : calls) {
      const bool refused = c.forward.status == call_status::rejected || c.forward.status == call_status::not_applied;
      const bool frozen = c.forward.status == call_status::waiting && c.forward.code == frozen_code;
      if (refused || frozen) {
        begin_compensation(s, {c.forward.code, "step " + st.name + " was refused: " + c.forward.code},
                           saga_state::failed);
        again = true;
        return;
      }
    }
  }
  const bool all_succeeded = std::all_of(
      calls.begin(), calls.end(), [](const call_state& c) { return c.forward.status == call_status::succeeded; });
  if (all_succeeded) {
    if (st.await_confirmation && !s.confirmed) {
      s.stage = phase::awaiting;
      if (s.input.hold_timeout && !s.hold_deadline) s.hold_deadline = now + *s.input.hold_timeout;
      return;
    }
    if (s.cursor + 1 == workflow_.steps.size()) {
      finish(s, saga_state::completed);
      return;
    }
    s.cursor += 1;
    again = true;
    return;
  }
  // The deadline bounds the way to the pivot; a confirmed held deduction
  // has been decided by the app and only captures.
  if (!pivot_passed && !confirmed_past_hold(s) && now >= s.deadline) {
    begin_compensation(s, {"deadline_exceeded", "the saga did not reach its pivot before its deadline"},
                       saga_state::failed);
    again = true;
    return;
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto& c = calls[i].forward;
    expire_if_overdue(c, st.retry, now);
    if (c.status == call_status::idle || (c.status == call_status::waiting && now >= c.due))
      send(s, {s.cursor, i, false}, now, d);
  }
}

void engine::expire_if_overdue(call_progress& c, const retry_policy& p, instant now) const {
  if (c.status != call_status::in_flight || now < c.due) return;
  // No answer in time: the outcome is unknown; the same key goes again.
  c.status = call_status::waiting;
  c.delivered = true;
  c.code = "timeout";
  c.due = now + backoff(p, c.attempts, random_);
}

bool engine::confirmed_past_hold(const saga& s) const {
  if (!s.confirmed) return false;
  for (std::size_t i = 0; i < s.cursor && i < workflow_.steps.size(); ++i)
    if (workflow_.steps[i].await_confirmation) return true;
  return false;
}

void engine::run_compensation(saga& s, instant now, decision& d, bool& again) const {
  const auto& st = workflow_.steps.at(s.cursor);
  auto& calls = s.calls.at(s.cursor);
  bool settled = true;
  if (st.undo != undo_kind::none) {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (!calls[i].may_have_applied()) continue;
      auto& u = calls[i].undo;
      switch (u.status) {
        case call_status::succeeded: continue;
        case call_status::applied:
          if (st.pivot) {
            // cancel_key lost the race: the pivot took effect, so the saga
            // is past it after all and finishes forward.
            calls[i].forward.status = call_status::succeeded;
            calls[i].forward.code.clear();
            s.stage = phase::forward;
            move_to(s, saga_state::running);
            s.error.reset();
            again = true;
            return;
          }
          settled = false;  // needs an operator (update_attention says why)
          continue;
        case call_status::rejected:
        case call_status::not_applied: settled = false; continue;
        case call_status::in_flight:
          settled = false;
          expire_if_overdue(u, st.retry, now);
          break;
        case call_status::idle:
        case call_status::waiting: settled = false; break;
      }
      if (u.status == call_status::idle || (u.status == call_status::waiting && now >= u.due))
        send(s, {s.cursor, i, true}, now, d);
    }
  }
  if (!settled) return;
  if (s.cursor == 0) {
    finish(s, s.end_after_compensation);
    return;
  }
  s.cursor -= 1;
  again = true;
}

void engine::update_attention(saga& s) const {
  if (s.stage == phase::done) return;
  s.attention.clear();
  const auto& st = workflow_.steps.at(s.cursor);
  const bool undoing = s.stage == phase::compensating;
  const auto& calls = s.calls.at(s.cursor);
  const bool pivot_passed = !undoing && past_pivot(s);
  for (std::size_t i = 0; i < calls.size() && s.attention.empty(); ++i) {
    const auto& c = undoing ? calls[i].undo : calls[i].forward;
    // Built only for the call that needs an operator: a batch step has up to 1000.
    auto where = [&] {
      return (undoing ? "undo of step " : "step ") + st.name + " on account " + account_of(s, st, i);
    };
    if (c.status == call_status::waiting && c.code == conflict_code)
      s.attention = where() + ": the shard reports an idempotency conflict";
    else if (c.status == call_status::waiting && c.attempts >= st.retry.attempt_budget)
      s.attention = where() + ": no answer after " + std::to_string(c.attempts) + " attempts (last: " + c.code + ")";
    else if (pivot_passed && c.status == call_status::rejected)
      s.attention = where() + " was refused after the pivot: " + c.code;
    else if (undoing && (c.status == call_status::rejected || c.status == call_status::not_applied))
      s.attention = where() + " was refused: " + c.code;
    else if (undoing && c.status == call_status::applied && !st.pivot)
      s.attention = where() + ": the effect applied and cannot be cancelled";
  }
  if (!s.attention.empty()) {
    move_to(s, saga_state::needs_attention);
    return;
  }
  switch (s.stage) {
    case phase::forward: move_to(s, saga_state::running); break;
    case phase::awaiting: move_to(s, saga_state::awaiting_confirmation); break;
    case phase::compensating: move_to(s, saga_state::compensating); break;
    case phase::done: break;
  }
}

void engine::advance(saga& s, instant now, decision& d) const {
  // Each pass moves the cursor or the stage; a saga has few steps.
  for (int pass = 0; pass < 64; ++pass) {
    bool again = false;
    switch (s.stage) {
      case phase::forward: run_forward(s, now, d, again); break;
      case phase::awaiting:
        if (s.confirmed) {
          s.stage = phase::forward;
          again = true;
        } else if (s.hold_deadline && now >= *s.hold_deadline) {
          begin_compensation(s, {"hold_expired", "the held deduction was not confirmed before its hold timeout"},
                             saga_state::compensated);
          again = true;
        }
        break;
      case phase::compensating: run_compensation(s, now, d, again); break;
      case phase::done: break;
    }
    if (!again) break;
  }
  update_attention(s);

  // When to look again: the earliest timeout or backoff of the calls now
  // awaited, the deadline while it still matters, the hold timeout.
  s.wake.reset();
  auto consider = [&](instant t) { s.wake = s.wake ? std::min(*s.wake, t) : t; };
  if (s.stage == phase::done) return;
  const bool undoing = s.stage == phase::compensating;
  for (const auto& c : s.calls.at(s.cursor)) {
    // An undo stops mattering once its call turns out not to have applied.
    if (undoing && !c.may_have_applied()) continue;
    const auto& p = undoing ? c.undo : c.forward;
    if (p.status == call_status::in_flight || p.status == call_status::waiting) consider(p.due);
  }
  if (s.stage == phase::forward && !past_pivot(s) && !confirmed_past_hold(s)) consider(s.deadline);
  if (s.stage == phase::awaiting && s.hold_deadline) consider(*s.hold_deadline);
}

}  // namespace tally::orch
