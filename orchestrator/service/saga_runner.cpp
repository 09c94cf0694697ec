#include "orchestrator/service/saga_runner.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <tuple>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"
#include "common/contract/saga_id.hpp"
#include "orchestrator/transport/shard_call.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

// An app's or operator's action on a saga this instance drives.
struct action_wait {
  explicit action_wait(asio::any_io_executor ex) : timer(ex, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  std::optional<engine::request_result> result;  // unset: the saga's write failed or went elsewhere
};

std::string_view to_string(engine::request_result r) {
  switch (r) {
    case engine::request_result::done: return "done";
    case engine::request_result::already: return "already";
    case engine::request_result::invalid_state: return "invalid_state";
  }
  return "invalid_state";
}

saga_runner::outcome outcome_of(engine::request_result r) {
  switch (r) {
    case engine::request_result::done: return saga_runner::outcome::done;
    case engine::request_result::already: return saga_runner::outcome::already;
    case engine::request_result::invalid_state: return saga_runner::outcome::invalid_state;
  }
  return saga_runner::outcome::invalid_state;
}

std::string_view to_string(answer_kind k) {
  switch (k) {
    case answer_kind::succeeded: return "succeeded";
    case answer_kind::rejected: return "rejected";
    case answer_kind::cancelled: return "cancelled";
    case answer_kind::already_applied_succeeded: return "already_applied";
    case answer_kind::already_applied_other: return "already_settled";
    case answer_kind::retry: return "retry";
    case answer_kind::conflict: return "conflict";
    case answer_kind::transport: return "transport";
    case answer_kind::not_delivered: return "not_delivered";
  }
  return "transport";
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

void append(decision& into, decision more) {
  for (auto& c : more.send) into.send.push_back(std::move(c));
}

asio::awaitable<void> pause(asio::any_io_executor ex, milliseconds d) {
  asio::steady_timer t(ex, d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

struct saga_runner::event {
  enum class kind { answer, wake, recover, action } what = kind::wake;
  call_ref ref{};
  int attempt = 0;
  answer reply{};
  saga_action action = saga_action::retry;
  std::int64_t action_id = 0;             // a stored action to finish, else 0
  std::shared_ptr<action_wait> waiter{};  // a requester in this instance
};

struct saga_runner::live_saga {
  explicit live_saga(asio::any_io_executor ex) : wake(ex) {}
  std::shared_ptr<const saga> s;  // the durable state; replaced, never changed in place
  std::int64_t version = 0;
  saga_type type = saga_type::credit;
  std::string request_hash;
  instant updated{};
  std::deque<event> inbox;
  bool driving = false;
  bool gone = false;
  asio::steady_timer wake;
  // Calls sent and not answered yet, by (step, item, undo, attempt): what
  // their attempt record needs when the answer comes.
  std::map<std::tuple<std::size_t, std::size_t, bool, int>, sent_call> sent;
  std::vector<asio::steady_timer*> waiters;  // woken by every durable change
  // Sent before their state was written (sendable_before_saving): written
  // with the next save, as is whether the state changed meanwhile.
  std::vector<step_attempt> unsaved_attempts;
  bool unsaved_change = false;

  stored_saga snapshot() const { return {*s, type, request_hash, version, updated}; }
  void notify() {
    for (auto* w : waiters) w->cancel();
    waiters.clear();
  }
  // No longer driven here: nothing more is scheduled, waiters look again.
  void stop() {
    gone = true;
    wake.cancel();
    notify();
  }
};

saga_runner::saga_runner(asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
                         std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics,
                         runner_options options)
    : ex_(ex),
      store_(store),
      routes_(routes),
      shards_(shards),
      options_(options),
      jitter_(std::random_device{}()),
      claim_now_(ex),
      started_(metrics.add_counter("tally_orch_sagas_started_total", "Sagas created by this instance")),
      replayed_(
          metrics.add_counter("tally_orch_sagas_replayed_total", "Start requests answered with an existing saga")),
      finished_(metrics.add_counter("tally_orch_sagas_finished_total", "Sagas this instance brought to an end state")),
      claimed_(metrics.add_counter("tally_orch_sagas_claimed_total", "Due or abandoned sagas this instance claimed")),
      lost_(metrics.add_counter("tally_orch_sagas_lost_total",
                                "Saga writes refused because another instance took the saga, or failed")),
      calls_(metrics.add_counter("tally_orch_calls_total", "Participant calls sent")),
      save_batch_(metrics.add_histogram("tally_orch_save_batch_size", "Saga writes per store transaction",
                                        {1, 2, 4, 8, 16, 32, 64, 128, 256})),
      live_gauge_(metrics.add_gauge("tally_orch_live_sagas", "Sagas this instance is driving")),
      saves_(
          ex, options.save_connections, options.save_batch,
          [this](std::size_t w, std::vector<save_request>& writes, std::vector<save_reply>& replies) {
            return flush_saves(w, writes, replies);
          },
          save_reply{pg::error{make_error_code(pg::errc::connection_failed), "", "shutting down"}, 0}) {
  for (const auto& w : workflows())
    engines_.emplace_back(w, [this] { return std::uniform_real_distribution<double>(0.0, 1.0)(jitter_); });
  for (auto type : all_saga_types)
    saga_seconds_.push_back(
        &metrics.add_histogram("tally_orch_saga_seconds", "Time from a saga's creation to its end state",
                               metrics::latency_bounds(), "type=\"" + std::string(to_string(type)) + "\""));
  for (std::size_t i = 0; i < shards_.size(); ++i)
    call_seconds_.push_back(&metrics.add_histogram("tally_orch_shard_call_seconds",
                                                   "Time from sending a call to a shard to its answer",
                                                   metrics::latency_bounds(), "shard=\"" + std::to_string(i) + "\""));
}

saga_runner::~saga_runner() {
  *alive_ = false;
  for (auto& [id, l] : live_) l->stop();
}

instant saga_runner::now() const {
  return std::chrono::time_point_cast<milliseconds>(std::chrono::system_clock::now());
}

const engine& saga_runner::engine_of(const saga& s) const {
  const auto& all = workflows();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].name == s.workflow) return engines_[i];
  throw std::logic_error("no workflow " + s.workflow);
}

asio::awaitable<pg::error> saga_runner::async_open() { co_return co_await store_.async_renew(now()); }

void saga_runner::start() {
  loops_ = 2;
  asio::co_spawn(ex_, claim_loop(), asio::detached);
  asio::co_spawn(ex_, renew_loop(), asio::detached);
}

asio::awaitable<void> saga_runner::async_stop(milliseconds grace) {
  stopping_ = true;
  claim_now_.cancel();
  const auto until = std::chrono::steady_clock::now() + grace;
  auto busy = [this] {
    if (loops_ > 0 || driving_ > 0) return true;
    for (const auto& [id, l] : live_)
      if (!l->sent.empty()) return true;
    return false;
  };
  while (busy() && std::chrono::steady_clock::now() < until) co_await pause(ex_, milliseconds(20));
  if (auto err = co_await store_.async_release_all())
    log::warn("could not release leases; other instances take the sagas when they expire", {{"error", err.message}});
  for (auto& [id, l] : live_) l->stop();
  live_.clear();
  live_gauge_.set(0);
}

// ---- saving -------------------------------------------------------------

asio::awaitable<saga_runner::save_reply> saga_runner::save(saga_write w, std::shared_ptr<const saga> keep) {
  return saves_.async_submit(save_request{std::move(w), std::move(keep)});
}

asio::awaitable<void> saga_runner::flush_saves(std::size_t, std::vector<save_request>& writes,
                                               std::vector<save_reply>& replies) {
  auto alive = alive_;
  std::vector<saga_write> batch;
  batch.reserve(writes.size());
  for (auto& w : writes) batch.push_back(std::move(w.write));
  save_batch_.observe(static_cast<double>(batch.size()));
  auto r = co_await store_.async_save(batch, now());
  if (!*alive) co_return;
  const bool refused = r.error && !pg::is_outcome_unknown(r.error.code) &&
                       r.error.code != make_error_code(pg::errc::connection_failed) &&
                       r.error.code != make_error_code(pg::errc::pool_exhausted);
  if (refused && batch.size() > 1) {
    // The server refused the transaction: one write is at fault, and it
    // must not take the others down with it. Each goes alone.
    log::warn("a batch of saga writes was refused; writing them one by one", {{"error", r.error.message}});
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto one = co_await store_.async_save(std::span(&batch[i], 1), now());
      if (!*alive) co_return;
      replies[i] = {one.error, one.error || one.versions.empty() ? 0 : one.versions[0]};
    }
    co_return;
  }
  for (std::size_t i = 0; i < replies.size(); ++i)
    replies[i] = {r.error, r.error || i >= r.versions.size() ? 0 : r.versions[i]};
}

// ---- driving a saga -----------------------------------------------------

std::shared_ptr<saga_runner::live_saga> saga_runner::adopt(stored_saga st) {
  auto l = std::make_shared<live_saga>(ex_);
  l->s = std::make_shared<const saga>(std::move(st.s));
  l->version = st.version;
  l->type = st.type;
  l->request_hash = std::move(st.request_hash);
  l->updated = st.updated;
  auto& slot = live_[l->s->id];
  if (slot) slot->stop();  // held before, then the lease lapsed: the new claim wins
  slot = l;
  live_gauge_.set(static_cast<double>(live_.size()));
  return l;
}

void saga_runner::forget(const std::shared_ptr<live_saga>& l) {
  l->stop();
  auto it = live_.find(l->s->id);
  if (it != live_.end() && it->second == l) live_.erase(it);
  live_gauge_.set(static_cast<double>(live_.size()));
}

// Events that arrived while a saga was being let go: its stored actions go
// back to the store for the next holder; a requester here stops waiting
// and asks the store instead.
void saga_runner::hand_over(const std::shared_ptr<live_saga>& l) {
  for (auto& e : l->inbox) {
    if (e.what != event::kind::action) continue;
    if (e.waiter) e.waiter->timer.cancel();
    if (e.action_id != 0) settle_action(e.action_id, std::nullopt);
  }
  l->inbox.clear();
}

// A stored action's end: its result recorded for the requester, or (none)
// put back for whoever holds the saga next.
void saga_runner::settle_action(std::int64_t id, std::optional<std::string> outcome_text) {
  auto record = [this, alive = alive_, id, text = std::move(outcome_text)]() -> asio::awaitable<void> {
    if (!*alive) co_return;
    // (Not a conditional expression: GCC 12 mishandles co_await in one.)
    pg::error err;
    if (text)
      err = co_await store_.async_finish_action(id, *text);
    else
      err = co_await store_.async_return_action(id, now());
    if (err) log::warn("could not record an action's result", {{"action", id}, {"error", err.message}});
  };
  asio::co_spawn(ex_, record, asio::detached);
}

void saga_runner::post(const std::shared_ptr<live_saga>& l, event e) {
  l->inbox.push_back(std::move(e));
  if (!l->driving) asio::co_spawn(ex_, drive(l), asio::detached);
}

void saga_runner::schedule_wake(const std::shared_ptr<live_saga>& l) {
  if (!l->s->wake) {
    l->wake.cancel();
    return;
  }
  // A millisecond late rather than early: the clock is read in whole milliseconds.
  const auto delay = std::max(milliseconds(0), *l->s->wake - now()) + milliseconds(1);
  l->wake.expires_after(delay);
  l->wake.async_wait([this, alive = alive_, weak = std::weak_ptr<live_saga>(l)](boost::system::error_code ec) {
    if (ec || !*alive) return;
    auto held = weak.lock();
    if (held && !held->gone) post(held, event{});
  });
}

struct saga_runner::prepared_call {
  call_ref ref;
  int attempt = 0;
  std::size_t shard = 0;
  nlohmann::json command;
};

// Every call of `d` becomes a shard command and an attempt record; the
// live saga remembers it until its answer comes.
std::vector<saga_runner::prepared_call> saga_runner::prepare(live_saga& l, const saga& s, const decision& d, instant t,
                                                             std::vector<step_attempt>& attempts) const {
  const auto& steps = find_workflow(s.workflow)->steps;
  std::vector<prepared_call> calls;
  for (const auto& c : d.send) {
    prepared_call p{c.ref, c.attempt, routes_.shard_of(s.tenant, c.account), shard_command(c, s.tenant)};
    auto text = p.command.dump();
    attempts.push_back({steps.at(c.ref.step).name, c.ref.item, c.ref.undo, c.attempt, shards_[p.shard]->endpoint().name,
                        text, t, std::nullopt, "", std::nullopt});
    l.sent[std::make_tuple(c.ref.step, c.ref.item, c.ref.undo, c.attempt)] = {p.shard, std::move(text), t};
    calls.push_back(std::move(p));
  }
  return calls;
}

void saga_runner::note_finished(const saga& s, saga_type type, instant now) {
  finished_.inc();
  saga_seconds_[static_cast<std::size_t>(type)]->observe(std::chrono::duration<double>(now - s.created).count());
}

// Sends calls whose saga state is durable; each answer becomes an event.
void saga_runner::dispatch(const std::shared_ptr<live_saga>& l, std::vector<prepared_call> calls) {
  const auto& steps = find_workflow(l->s->workflow)->steps;
  for (auto& c : calls) {
    if (failpoint::armed()) failpoint::hit("sending." + steps.at(c.ref.step).name);
    calls_.inc();
    auto call = [this, alive = alive_, l, c = std::move(c)]() mutable -> asio::awaitable<void> {
      const auto sent = std::chrono::steady_clock::now();
      auto a = co_await shards_[c.shard]->async_call(std::move(c.command));
      if (!*alive) co_return;
      call_seconds_[c.shard]->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count());
      if (l->gone) co_return;
      post(l, event{event::kind::answer, c.ref, c.attempt, std::move(a)});
    };
    asio::co_spawn(ex_, std::move(call), asio::detached);
  }
}

asio::awaitable<void> saga_runner::drive(std::shared_ptr<live_saga> l) {
  auto alive = alive_;
  l->driving = true;
  ++driving_;
  while (!l->inbox.empty() && !l->gone) {
    std::deque<event> events;
    events.swap(l->inbox);
    auto next = std::make_shared<saga>(*l->s);
    const auto& eng = engine_of(*next);
    const auto& workflow = *find_workflow(next->workflow);
    const auto& steps = workflow.steps;
    const auto t = now();
    decision d;
    std::vector<step_attempt> attempts;
    std::vector<std::pair<const event*, engine::request_result>> acted;
    for (const auto& e : events) {
      switch (e.what) {
        case event::kind::answer: {
          const auto key = std::make_tuple(e.ref.step, e.ref.item, e.ref.undo, e.attempt);
          if (auto it = l->sent.find(key); it != l->sent.end()) {
            attempts.push_back({steps.at(e.ref.step).name, e.ref.item, e.ref.undo, e.attempt,
                                shards_[it->second.shard]->endpoint().name, it->second.command, it->second.sent,
                                std::string(to_string(e.reply.kind)), e.reply.code, t});
            l->sent.erase(it);
          }
          if (failpoint::armed()) failpoint::hit("answered." + steps.at(e.ref.step).name);
          append(d, eng.on_answer(*next, e.ref, e.reply, t));
          break;
        }
        case event::kind::wake:
          if (next->wake && t >= *next->wake) append(d, eng.on_wake(*next, t));
          break;
        case event::kind::recover: append(d, eng.recover(*next, t)); break;
        case event::kind::action: acted.emplace_back(&e, apply_action(eng, *next, e.action, t, d)); break;
      }
    }

    auto calls = prepare(*l, *next, d, t, attempts);

    // A requester here learns the result; a stored action gets it recorded,
    // or goes back to wait for the saga's next holder when this write failed.
    auto answer_requesters = [&](bool failed) {
      for (auto& [e, r] : acted) {
        if (e->waiter) {
          if (!failed) e->waiter->result = r;
          e->waiter->timer.cancel();
        }
        if (e->action_id != 0)
          settle_action(e->action_id, failed ? std::nullopt : std::optional<std::string>(to_string(r)));
      }
    };

    if (*next == *l->s && attempts.empty()) {  // nothing changed, nothing to write
      answer_requesters(false);
      schedule_wake(l);
      continue;
    }
    const bool terminal = is_terminal(next->state);
    const bool keep = !terminal && next->wake && *next->wake - t <= options_.keep_horizon;
    const bool changed = l->unsaved_change || next->state != l->s->state || next->error != l->s->error;
    for (auto& a : attempts) l->unsaved_attempts.push_back(std::move(a));
    if (keep && acted.empty() && !calls.empty() && std::all_of(calls.begin(), calls.end(), [&](const prepared_call& c) {
          return !c.ref.undo && workflow.sendable_before_saving(c.ref.step);
        })) {
      // Forward-only calls after the pivot go at once; this state is
      // written with the saga's next change.
      l->unsaved_change = changed;
      l->s = next;
      dispatch(l, std::move(calls));
      schedule_wake(l);
      continue;
    }
    saga_write w{next.get(), l->version, changed, keep, std::move(l->unsaved_attempts)};
    l->unsaved_attempts.clear();
    l->unsaved_change = false;
    auto [error, version] = co_await save(std::move(w), next);
    if (!*alive) break;
    if (error || version == 0) {
      // Another instance holds the saga now, or the store failed and the
      // outcome of this write is unknown. Either way this instance stops
      // driving it; whoever claims it next recovers from what is durable.
      lost_.inc();
      answer_requesters(true);
      forget(l);
      if (error) {
        log::warn("saga write failed; letting the saga go", {{"saga_id", next->id}, {"error", error.message}});
        asio::co_spawn(ex_, release(next->id), asio::detached);
      }
      break;
    }
    l->s = next;
    l->version = version;
    l->updated = t;
    l->notify();
    answer_requesters(false);
    dispatch(l, std::move(calls));
    if (terminal) note_finished(*next, l->type, t);
    if (terminal || !keep) {
      forget(l);
      hand_over(l);
    } else {
      schedule_wake(l);
    }
  }
  l->driving = false;
  --driving_;
}

// Gives up the lease of a saga whose write failed, once the store answers,
// so that a claim (this instance's or another's) recovers it from what is
// durable.
asio::awaitable<void> saga_runner::release(std::string saga_id) {
  auto alive = alive_;
  for (milliseconds delay(100); *alive && !stopping_; delay = std::min(delay * 2, milliseconds(5000))) {
    co_await pause(ex_, delay);
    if (!*alive) co_return;
    if (!co_await store_.async_release(saga_id)) co_return;
  }
}

// ---- starting -----------------------------------------------------------

asio::awaitable<saga_runner::result> saga_runner::resolve_refund(saga_request& r) {
  auto got = co_await store_.async_get(r.input.original_saga_id);
  if (got.error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
  if (got.sagas.empty() || got.sagas[0].s.tenant != r.tenant)
    co_return result{outcome::not_found, std::nullopt, "no saga " + r.input.original_saga_id};
  auto refused = orch::resolve_refund(r, got.sagas[0].s, got.sagas[0].type);
  if (!refused) co_return result{outcome::created};
  switch (refused->why) {
    case refund_refusal::reason::not_found: co_return result{outcome::not_found, std::nullopt, refused->message};
    case refund_refusal::reason::invalid: co_return result{outcome::invalid, std::nullopt, refused->message};
    case refund_refusal::reason::invalid_state: break;
  }
  co_return result{outcome::invalid_state, std::nullopt, refused->message};
}

asio::awaitable<saga_runner::result> saga_runner::async_start(saga_request request) {
  auto alive = alive_;
  if (stopping_) co_return result{outcome::unavailable, std::nullopt, "the orchestrator is shutting down"};
  if (request.type == saga_type::refund) {
    auto resolved = co_await resolve_refund(request);
    if (!*alive) co_return result{};
    if (resolved.kind != outcome::created) co_return resolved;
  }
  const auto t = now();
  if (request.input.expires_at && *request.input.expires_at <= unix_ms(t)) {
    // A new credit must expire later than now; a replay of one accepted
    // before its expiry stays a replay.
    saga_filter key{request.tenant, request.type, request.biz_id};
    auto found = co_await store_.async_list(std::move(key));
    if (!*alive) co_return result{};
    if (found.error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
    if (found.sagas.empty()) co_return result{outcome::invalid, std::nullopt, "expires_at must be later than now"};
    auto existing = std::move(found.sagas.front());
    if (existing.request_hash != request.request_hash)
      co_return result{outcome::conflict, std::move(existing),
                       "biz_id " + request.biz_id + " was used for another " + std::string(to_string(request.type))};
    replayed_.inc();
    co_return result{outcome::replayed, std::move(existing)};
  }
  std::array<std::uint8_t, 10> random{};
  RAND_bytes(random.data(), static_cast<int>(random.size()));
  auto s = std::make_shared<saga>();
  s->id = contract::new_saga_id(t, random);
  s->tenant = request.tenant;
  s->biz_id = request.biz_id;
  s->workflow = request.workflow;
  s->input = request.input;
  s->created = t;
  if (request.timeout) s->deadline = t + *request.timeout;

  // The saga's first calls are prepared (and recorded) by a live entry that
  // is adopted only once the saga is durable.
  auto l = std::make_shared<live_saga>(ex_);
  l->type = request.type;
  l->request_hash = request.request_hash;
  auto d = engine_of(*s).start(*s, t);
  std::vector<step_attempt> attempts;
  auto calls = prepare(*l, *s, d, t, attempts);
  const bool terminal = is_terminal(s->state);
  const bool keep = !terminal && s->wake && *s->wake - t <= options_.keep_horizon;
  saga_write w{s.get(), 0, true, keep, std::move(attempts), request.type, request.request_hash};
  auto [error, version] = co_await save(std::move(w), s);
  if (!*alive) co_return result{};
  if (error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
  if (version == 0) {
    auto found = co_await store_.async_existing(request.tenant, request.type, request.biz_id, request.request_hash);
    if (!*alive) co_return result{};
    if (found.error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
    auto& existing = found.saga;
    if (found.outcome == saga_store::created::conflict)
      co_return result{outcome::conflict, std::move(existing),
                       "biz_id " + request.biz_id + " was used for another " + std::string(to_string(request.type))};
    replayed_.inc();
    // The live copy is fresher while this instance drives it.
    if (auto it = live_.find(existing.s.id); it != live_.end())
      co_return result{outcome::replayed, it->second->snapshot()};
    co_return result{outcome::replayed, std::move(existing)};
  }
  started_.inc();
  l->s = s;
  l->version = 1;
  l->updated = t;
  result out{outcome::created, l->snapshot()};
  if (terminal) {
    note_finished(*s, request.type, t);
    co_return out;
  }
  auto& slot = live_[s->id];
  slot = l;
  live_gauge_.set(static_cast<double>(live_.size()));
  dispatch(l, std::move(calls));
  if (keep)
    schedule_wake(l);
  else
    forget(l);
  co_return out;
}

// ---- reading and acting -------------------------------------------------

asio::awaitable<saga_runner::result> saga_runner::async_get(std::string tenant, std::string saga_id, milliseconds wait,
                                                            bool or_awaiting) {
  auto alive = alive_;
  auto settled = [or_awaiting](saga_state s) {
    return is_terminal(s) || (or_awaiting && s == saga_state::awaiting_confirmation);
  };
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const bool last = std::chrono::steady_clock::now() >= until;
    if (auto it = live_.find(saga_id); it != live_.end()) {
      auto l = it->second;
      if (l->s->tenant != tenant) co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
      if (last || settled(l->s->state)) co_return result{outcome::done, l->snapshot()};
      asio::steady_timer changed(ex_, until);
      l->waiters.push_back(&changed);
      boost::system::error_code ec;
      co_await changed.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!*alive) co_return result{};
      std::erase(l->waiters, &changed);
      if (l->gone && settled(l->s->state)) co_return result{outcome::done, l->snapshot()};
      continue;
    }
    auto got = co_await store_.async_get(saga_id);
    if (!*alive) co_return result{};
    if (got.error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
    if (got.sagas.empty() || got.sagas[0].s.tenant != tenant)
      co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
    if (last || settled(got.sagas[0].s.state)) co_return result{outcome::done, std::move(got.sagas[0])};
    // Held elsewhere: poll the store.
    co_await pause(ex_, std::min(milliseconds(25),
                                 std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now())));
    if (!*alive) co_return result{};
  }
}

asio::awaitable<saga_runner::result> saga_runner::async_act(std::string tenant, std::string saga_id,
                                                            saga_action action) {
  auto alive = alive_;
  if (auto it = live_.find(saga_id); it != live_.end() && !stopping_) {
    auto l = it->second;
    if (l->s->tenant != tenant) co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
    auto w = std::make_shared<action_wait>(ex_);
    w->timer.expires_after(options_.action_timeout);
    event e;
    e.what = event::kind::action;
    e.action = action;
    e.waiter = w;
    post(l, std::move(e));
    boost::system::error_code ec;
    co_await w->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive) co_return result{};
    if (w->result) co_return result{outcome_of(*w->result), l->snapshot()};
    // Let go or lost meanwhile: act through the store like any other instance.
  }
  auto got = co_await store_.async_get(saga_id);
  if (!*alive) co_return result{};
  if (got.error) co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
  if (got.sagas.empty() || got.sagas[0].s.tenant != tenant)
    co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
  auto st = std::move(got.sagas[0]);
  if (is_terminal(st.s.state)) {  // nothing to write: the engine only judges the request
    auto copy = st.s;
    decision d;
    auto r = apply_action(engine_of(copy), copy, action, now(), d);
    co_return result{outcome_of(r), std::move(st)};
  }
  if (stopping_) co_return result{outcome::unavailable, std::nullopt, "the orchestrator is shutting down"};
  co_return co_await act_elsewhere(std::move(st), action);
}

asio::awaitable<saga_runner::result> saga_runner::act_elsewhere(stored_saga st, saga_action action) {
  auto alive = alive_;
  std::int64_t id = 0;
  if (auto err = co_await store_.async_request_action(st.s.id, action, now(), id))
    co_return result{outcome::unavailable, std::nullopt, "the saga store is unavailable"};
  if (!*alive) co_return result{};
  claim_now_.cancel();  // the saga may be free: claim it now rather than at the next tick
  const auto until = std::chrono::steady_clock::now() + options_.action_timeout;
  std::string text;
  while (text.empty() && std::chrono::steady_clock::now() < until) {
    co_await pause(ex_, milliseconds(10));
    if (!*alive) co_return result{};
    if (auto err = co_await store_.async_action_result(id, text)) text.clear();
    if (!*alive) co_return result{};
  }
  auto now_held = co_await async_get(st.s.tenant, st.s.id, milliseconds(0));
  if (!*alive) co_return result{};
  if (text == "done" || text == "already" || text == "invalid_state") {
    now_held.kind = text == "done" ? outcome::done : text == "already" ? outcome::already : outcome::invalid_state;
    co_return now_held;
  }
  if (now_held.saga && is_terminal(now_held.saga->s.state)) {
    // It ended before anyone took the action: judge it as on any finished saga.
    auto copy = now_held.saga->s;
    decision d;
    now_held.kind = outcome_of(apply_action(engine_of(copy), copy, action, now(), d));
    co_return now_held;
  }
  co_return result{outcome::unavailable, std::nullopt, "the saga could not be updated in time; retry"};
}

// ---- claiming, renewing, actions ----------------------------------------

// Actions the store handed over with a claim: each goes to its saga's
// inbox, after the recovery a claim posts, so both are applied together.
void saga_runner::deliver(std::vector<pending_action> actions) {
  for (auto& a : actions) {
    auto it = live_.find(a.saga_id);
    if (it == live_.end()) {  // let go meanwhile: back to whoever holds it next
      settle_action(a.id, std::nullopt);
      continue;
    }
    event e;
    e.what = event::kind::action;
    e.action = a.action;
    e.action_id = a.id;
    post(it->second, std::move(e));
  }
}

asio::awaitable<void> saga_runner::claim_loop() {
  auto alive = alive_;
  while (!stopping_) {
    auto r = co_await store_.async_claim(options_.claim_batch, now());
    if (!*alive) co_return;
    if (stopping_) break;
    if (r.error) log::warn("claiming due sagas failed", {{"error", r.error.message}});
    // A claimed saga's recovery and its actions go into its inbox before it
    // is driven, so they are applied in one write.
    std::vector<std::shared_ptr<live_saga>> claimed;
    for (auto& st : r.sagas) {
      claimed_.inc();
      claimed.push_back(adopt(std::move(st)));
      claimed.back()->inbox.push_back(event{event::kind::recover});
    }
    deliver(std::move(r.actions));
    for (auto& l : claimed)
      if (!l->driving && !l->inbox.empty()) asio::co_spawn(ex_, drive(l), asio::detached);
    if (r.sagas.size() < options_.claim_batch && !stopping_) {
      claim_now_.expires_after(options_.claim_interval);
      boost::system::error_code ec;
      co_await claim_now_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!*alive) co_return;
    }
  }
  --loops_;
}

asio::awaitable<void> saga_runner::renew_loop() {
  auto alive = alive_;
  while (!stopping_) {
    if (auto err = co_await store_.async_renew(now())) log::warn("renewing leases failed", {{"error", err.message}});
    if (!*alive) co_return;
    for (auto left = options_.lease / 3; left > milliseconds(0) && !stopping_; left -= milliseconds(50)) {
      co_await pause(ex_, std::min(left, milliseconds(50)));
      if (!*alive) co_return;
    }
  }
  --loops_;
}

}  // namespace tally::orch
