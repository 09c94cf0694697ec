#include "orchestrator/service/saga_driver.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"
#include "orchestrator/transport/shard_call.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

// The outcome an attempt is recorded with.
constexpr contract::enum_names<answer_kind, 9> answer_kind_names{
    {{answer_kind::succeeded, "succeeded"},
     {answer_kind::rejected, "rejected"},
     {answer_kind::cancelled, "cancelled"},
     {answer_kind::already_applied_succeeded, "already_applied"},
     {answer_kind::already_applied_other, "already_settled"},
     {answer_kind::retry, "retry"},
     {answer_kind::conflict, "conflict"},
     {answer_kind::transport, "transport"},
     {answer_kind::not_delivered, "not_delivered"}}};
static_assert(contract::names_every_value(answer_kind_names));
std::string_view to_string(answer_kind k) { return contract::name_of(answer_kind_names, k); }

void append(decision& into, decision more) {
  for (auto& c : more.send) into.send.push_back(std::move(c));
}

}  // namespace

bool keeps_lease(const saga& s, instant now, milliseconds horizon) {
  return !is_terminal(s.state) && s.wake && *s.wake - now <= horizon;
}

engine::request_result apply_action(const engine& e, saga& s, saga_action a, instant now, decision& d) {
  switch (a) {
    case saga_action::confirm: return e.confirm(s, now, d);
    case saga_action::cancel: return e.cancel(s, now, d);
    case saga_action::abort: return e.abort(s, now, d);
    case saga_action::retry: return e.retry_now(s, now, d);
  }
  return engine::request_result::invalid_state;
}

saga_driver::saga_driver(asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
                         std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics,
                         driver_options options, task_group& work)
    : ex_(ex),
      store_(store),
      routes_(routes),
      shards_(shards),
      options_(options),
      work_(work),
      jitter_(std::random_device{}()),
      finished_(metrics.add_counter("tally_orch_sagas_finished_total", "Sagas this instance brought to an end state")),
      claimed_(metrics.add_counter("tally_orch_sagas_claimed_total", "Due or abandoned sagas this instance claimed")),
      lost_(metrics.add_counter("tally_orch_sagas_lost_total",
                                "Saga writes refused because another instance took the saga, or failed")),
      calls_(metrics.add_counter("tally_orch_calls_total", "Participant calls sent")),
      account_busy_(metrics.add_counter("tally_orch_account_busy_total",
                                        "Calls a shard refused account_busy (its account's queue was past the "
                                        "shard's safe wait), each resent with the same key after a backoff")),
      save_batch_(metrics.add_histogram("tally_orch_save_batch_size", "Saga writes per store transaction",
                                        {1, 2, 4, 8, 16, 32, 64, 128, 256})),
      live_gauge_(metrics.add_gauge("tally_orch_live_sagas", "Sagas this instance is driving")),
      saves_(
          ex, options.save_connections, options.save_batch,
          [this](std::size_t, std::vector<save_request>& writes, std::vector<save_reply>& replies) {
            return flush_saves(writes, replies);
          },
          save_reply{pg::error{make_error_code(pg::errc::connection_failed), "", "shutting down"}, 0}) {
  for (const auto& w : workflows())
    flows_.push_back({&w, engine(w, [this] { return std::uniform_real_distribution<double>(0.0, 1.0)(jitter_); })});
  for (auto type : all_saga_types)
    saga_seconds_.push_back(
        &metrics.add_histogram("tally_orch_saga_seconds", "Time from a saga's creation to its end state",
                               metrics::latency_bounds(), "type=\"" + std::string(to_string(type)) + "\""));
  for (std::size_t i = 0; i < shards_.size(); ++i)
    call_seconds_.push_back(&metrics.add_histogram("tally_orch_shard_call_seconds",
                                                   "Time from sending a call to a shard to its answer",
                                                   metrics::latency_bounds(), "shard=\"" + std::to_string(i) + "\""));
}

instant wall_clock() { return std::chrono::time_point_cast<milliseconds>(std::chrono::system_clock::now()); }

const workflow_engine& saga_driver::flow_of(const saga& s) const {
  for (const auto& f : flows_)
    if (f.workflow->name == s.workflow) return f;
  throw std::logic_error("no workflow " + s.workflow);
}

std::shared_ptr<live_saga> saga_driver::find(const std::string& saga_id) const {
  auto it = live_.find(saga_id);
  return it == live_.end() ? nullptr : it->second;
}

bool saga_driver::busy() const {
  if (driving_ > 0) return true;
  for (const auto& [id, l] : live_)
    if (!l->sent.empty()) return true;
  return false;
}

void saga_driver::let_all_go() {
  for (auto& [id, l] : live_) l->stop();
  live_.clear();
  count_live();
}

void saga_driver::count_live() { live_gauge_.set(static_cast<double>(live_.size())); }

// ---- driving a saga -----------------------------------------------------

void saga_driver::post(const std::shared_ptr<live_saga>& l, saga_event e) {
  l->inbox.push_back(std::move(e));
  if (!l->driving) work_.spawn([this, l] { return drive(l); });
}

void saga_driver::schedule_wake(const std::shared_ptr<live_saga>& l) {
  if (!l->s->wake) {
    l->wake.cancel();
    return;
  }
  // A millisecond late rather than early: the clock is read in whole milliseconds.
  const auto delay = std::max(milliseconds(0), *l->s->wake - wall_clock()) + milliseconds(1);
  l->wake.expires_after(delay);
  // The handler holds the saga, not the driver's word: a saga let go (which
  // the driver does to all before it goes) has its wake cancelled and is gone.
  l->wake.async_wait([this, weak = std::weak_ptr<live_saga>(l)](boost::system::error_code ec) {
    if (ec) return;
    auto held = weak.lock();
    if (held && !held->gone) post(held, saga_event{});
  });
}

// Every call of `d` becomes a shard command; the live saga remembers it
// until its answer comes, and only then records the attempt (sent and
// answered in one row): an attempt still unanswered is in the saga's
// progress (the call's status and attempt count), not in its history.
std::vector<saga_driver::prepared_call> saga_driver::prepare(live_saga& l, const saga& s, const decision& d,
                                                             instant t) const {
  std::vector<prepared_call> calls;
  for (const auto& c : d.send) {
    // Encoded once: the same text goes to the shard and into the attempt's record.
    prepared_call p{c.ref, c.attempt, routes_.shard_of(s.tenant, c.account),
                    contract::to_json(shard_command(c, s.tenant)).dump()};
    l.sent[std::make_tuple(c.ref.step, c.ref.item, c.ref.undo, c.attempt)] = {p.shard, p.command, t};
    calls.push_back(std::move(p));
  }
  return calls;
}

void saga_driver::note_finished(const saga& s, saga_type type, instant now) {
  finished_.inc();
  saga_seconds_[static_cast<std::size_t>(type)]->observe(std::chrono::duration<double>(now - s.created).count());
}

// Sends calls whose saga state is durable; each answer becomes an event.
void saga_driver::dispatch(const std::shared_ptr<live_saga>& l, const workflow_def& w,
                           std::vector<prepared_call> calls) {
  for (auto& c : calls) {
    if (failpoint::armed()) failpoint::hit("sending." + w.steps.at(c.ref.step).name);
    calls_.inc();
    auto call = [this, l, c = std::move(c)]() mutable -> asio::awaitable<void> {
      const auto sent = std::chrono::steady_clock::now();
      auto a = co_await shards_[c.shard]->async_call(std::move(c.command));
      call_seconds_[c.shard]->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count());
      if (a.kind == answer_kind::retry && a.code == account_busy_code) account_busy_.inc();
      if (l->gone) co_return;
      post(l, saga_event{saga_event::kind::answer, c.ref, c.attempt, std::move(a)});
    };
    work_.spawn(std::move(call));
  }
}

// Applies the saga's waiting events, all together, to a copy of its state,
// and prepares (and remembers) the calls they lead to.
void saga_driver::apply_events(live_saga& l, event_round& r) {
  r.events.swap(l.inbox);
  r.next = std::make_shared<saga>(*l.s);
  const auto& flow = flow_of(*r.next);
  const auto& eng = flow.eng;
  r.workflow = flow.workflow;
  r.t = wall_clock();
  for (const auto& e : r.events) {
    switch (e.what) {
      case saga_event::kind::answer: {
        const auto& step = r.workflow->steps.at(e.ref.step);
        const auto key = std::make_tuple(e.ref.step, e.ref.item, e.ref.undo, e.attempt);
        if (auto it = l.sent.find(key); it != l.sent.end()) {
          r.attempts.push_back({step.name, e.ref.item, e.ref.undo, e.attempt,
                                shards_[it->second.shard]->endpoint().name, it->second.command, it->second.sent,
                                std::string(to_string(e.reply.kind)), e.reply.code, r.t});
          l.sent.erase(it);
        }
        if (failpoint::armed()) failpoint::hit("answered." + step.name);
        append(r.d, eng.on_answer(*r.next, e.ref, e.reply, r.t));
        break;
      }
      case saga_event::kind::wake:
        if (r.next->wake && r.t >= *r.next->wake) append(r.d, eng.on_wake(*r.next, r.t));
        break;
      case saga_event::kind::recover: append(r.d, eng.recover(*r.next, r.t)); break;
      case saga_event::kind::action: r.acted.emplace_back(&e, apply_action(eng, *r.next, e.action, r.t, r.d)); break;
    }
  }
  r.calls = prepare(l, *r.next, r.d, r.t);
}

// A requester here learns the result; a stored action gets it recorded,
// or goes back to wait for the saga's next holder when this write failed.
void saga_driver::answer_requesters(const event_round& r, bool failed) {
  for (const auto& [e, result] : r.acted) {
    if (e->waiter) {
      if (!failed) e->waiter->result = result;
      e->waiter->timer.cancel();
    }
    if (e->action_id != 0) settle_action(e->action_id, failed ? std::nullopt : std::optional(result));
  }
}

// Whether the round's calls may go before its state is written: only
// forward calls its workflow may send before saving, and no action taken.
bool saga_driver::sendable_before_saving(const event_round& r) {
  return r.acted.empty() && !r.calls.empty() &&
         std::all_of(r.calls.begin(), r.calls.end(), [&](const prepared_call& c) {
           return !c.ref.undo && r.workflow->sendable_before_saving(c.ref.step);
         });
}

// Another instance holds the saga now, or the store failed and the outcome
// of this write is unknown. Either way this instance stops driving it;
// whoever claims it next recovers from what is durable.
void saga_driver::write_lost(const std::shared_ptr<live_saga>& l, const event_round& r, const pg::error& error) {
  lost_.inc();
  answer_requesters(r, true);
  forget(l);
  if (error) {
    log::warn("saga write failed; letting the saga go", {{"saga_id", r.next->id}, {"error", error.message}});
    work_.spawn([this, id = r.next->id] { return release(id); });
  }
}

// The round's state is durable: its waiters and requesters learn it, its
// calls go, and a saga that ended or sleeps long is let go.
void saga_driver::write_saved(const std::shared_ptr<live_saga>& l, event_round& r, std::int64_t version, bool keep) {
  const bool terminal = is_terminal(r.next->state);
  l->s = r.next;
  l->version = version;
  l->updated = r.t;
  l->notify();
  answer_requesters(r, false);
  dispatch(l, *r.workflow, std::move(r.calls));
  if (terminal) note_finished(*r.next, l->type, r.t);
  if (terminal || !keep) {
    forget(l);
    hand_over(l);
  } else {
    schedule_wake(l);
  }
}

asio::awaitable<void> saga_driver::drive(std::shared_ptr<live_saga> l) {
  l->driving = true;
  ++driving_;
  while (!l->inbox.empty() && !l->gone) {
    event_round r;
    apply_events(*l, r);
    if (*r.next == *l->s && r.attempts.empty()) {  // nothing changed, nothing to write
      answer_requesters(r, false);
      schedule_wake(l);
      continue;
    }
    const bool keep = keeps_lease(*r.next, r.t, options_.keep_horizon);
    const bool changed = l->unsaved_change || r.next->state != l->s->state || r.next->error != l->s->error;
    for (auto& a : r.attempts) l->unsaved_attempts.push_back(std::move(a));
    if (keep && sendable_before_saving(r)) {
      // Forward-only calls after the pivot go at once; this state is
      // written with the saga's next change.
      l->unsaved_change = changed;
      l->s = r.next;
      dispatch(l, *r.workflow, std::move(r.calls));
      schedule_wake(l);
      continue;
    }
    saga_write w{r.next.get(), l->version, changed, keep, std::move(l->unsaved_attempts)};
    l->unsaved_attempts.clear();
    l->unsaved_change = false;
    auto [error, version] = co_await save(std::move(w), r.next);
    if (error || version == 0) {
      write_lost(l, r, error);
      break;
    }
    write_saved(l, r, version, keep);
  }
  l->driving = false;
  --driving_;
}

}  // namespace tally::orch
