// The sagas this instance holds, and their writes: a new saga made durable
// and adopted, claimed sagas adopted, sagas let go, and the saves that many
// sagas' writes share (saga_driver.hpp; driving them is saga_driver.cpp).
#include <set>

#include "common/log/log.hpp"
#include "orchestrator/service/saga_driver.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using std::chrono::milliseconds;

// ---- saving -------------------------------------------------------------

asio::awaitable<saga_driver::save_reply> saga_driver::save(saga_write w, std::shared_ptr<const saga> keep) {
  return saves_.async_submit(save_request{std::move(w), std::move(keep)});
}

asio::awaitable<void> saga_driver::flush_saves(std::vector<save_request>& writes, std::vector<save_reply>& replies) {
  std::vector<saga_write> batch;
  batch.reserve(writes.size());
  for (auto& w : writes) batch.push_back(std::move(w.write));
  save_batch_.observe(static_cast<double>(batch.size()));
  auto r = co_await store_.async_save(batch, wall_clock());
  const bool refused = r.error && !pg::is_outcome_unknown(r.error.code) &&
                       r.error.code != make_error_code(pg::errc::connection_failed) &&
                       r.error.code != make_error_code(pg::errc::pool_exhausted) &&
                       r.error.code != make_error_code(pg::errc::no_synchronous_standby);
  if (refused && batch.size() > 1) {
    // The server refused the transaction: one write is at fault, and it
    // must not take the others down with it. Each goes alone.
    log::warn("a batch of saga writes was refused; writing them one by one", {{"error", r.error.message}});
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto one = co_await store_.async_save(std::span(&batch[i], 1), wall_clock());
      replies[i] = {one.error, one.error || one.versions.empty() ? 0 : one.versions[0]};
    }
    co_return;
  }
  for (std::size_t i = 0; i < replies.size(); ++i)
    replies[i] = {r.error, r.error || i >= r.versions.size() ? 0 : r.versions[i]};
}

// ---- starting and claiming ----------------------------------------------

asio::awaitable<saga_driver::begun> saga_driver::async_begin(std::shared_ptr<saga> s, saga_type type,
                                                             std::string request_hash) {
  // The saga's first calls are prepared (and recorded) by a live entry that
  // is adopted only once the saga is durable.
  const auto t = wall_clock();
  auto l = std::make_shared<live_saga>(ex_);
  l->type = type;
  l->request_hash = request_hash;
  const auto& flow = flow_of(*s);
  auto d = flow.eng.start(*s, t);
  auto calls = prepare(*l, *s, d, t);
  const bool keep = keeps_lease(*s, t, options_.keep_horizon);
  saga_write w{s.get(), 0, true, keep, {}, type, std::move(request_hash)};
  auto [error, version] = co_await save(std::move(w), s);
  if (error || version == 0) {
    // The outcome of a failed write is unknown: the saga may be durable and
    // leased to this instance, which does not drive it. Giving the lease up
    // lets a claim recover it from what is durable.
    if (error) work_.spawn([this, id = s->id] { return release(id); });
    co_return begun{error, nullptr};
  }
  l->s = s;
  l->version = 1;
  l->updated = t;
  if (is_terminal(s->state)) {
    note_finished(*s, type, t);
    co_return begun{{}, l};
  }
  live_[s->id] = l;
  count_live();
  dispatch(l, *flow.workflow, std::move(calls));
  if (keep)
    schedule_wake(l);
  else
    forget(l);
  co_return begun{{}, l};
}

std::shared_ptr<live_saga> saga_driver::adopt(stored_saga st) {
  auto l = std::make_shared<live_saga>(ex_);
  l->s = std::make_shared<const saga>(std::move(st.s));
  l->version = st.version;
  l->type = st.type;
  l->request_hash = std::move(st.request_hash);
  l->updated = st.updated;
  auto& slot = live_[l->s->id];
  if (slot) slot->stop();  // held before, then the lease lapsed: the new claim wins
  slot = l;
  count_live();
  return l;
}

void saga_driver::take_claimed(saga_store::load_result claim) {
  // A claimed saga's recovery and its actions go into its inbox before it
  // is driven, so they are applied in one write.
  std::vector<std::shared_ptr<live_saga>> claimed;
  for (auto& st : claim.sagas) {
    claimed_.inc();
    claimed.push_back(adopt(std::move(st)));
    claimed.back()->inbox.push_back(saga_event{saga_event::kind::recover});
  }
  std::set<std::string> released;
  for (auto& a : claim.actions) {
    auto l = find(a.saga_id);
    if (!l) {
      // Leased here but not driven (a write failed and its release is
      // still to come): give the lease up and the action back, for whoever
      // claims the saga next.
      if (released.insert(a.saga_id).second) work_.spawn([this, id = a.saga_id] { return release(id); });
      settle_action(a.id, std::nullopt);
      continue;
    }
    saga_event e;
    e.what = saga_event::kind::action;
    e.action = a.action;
    e.action_id = a.id;
    post(l, std::move(e));
  }
  for (auto& l : claimed)
    if (!l->driving && !l->inbox.empty()) work_.spawn([this, l] { return drive(l); });
}

// ---- letting go ---------------------------------------------------------

void saga_driver::forget(const std::shared_ptr<live_saga>& l) {
  l->stop();
  auto it = live_.find(l->s->id);
  if (it != live_.end() && it->second == l) live_.erase(it);
  count_live();
}

// Events that arrived while a saga was being let go: its stored actions go
// back to the store for the next holder; a requester here stops waiting
// and asks the store instead.
void saga_driver::hand_over(const std::shared_ptr<live_saga>& l) {
  for (auto& e : l->inbox) {
    if (e.what != saga_event::kind::action) continue;
    if (e.waiter) e.waiter->timer.cancel();
    if (e.action_id != 0) settle_action(e.action_id, std::nullopt);
  }
  l->inbox.clear();
}

// A stored action's end: its result recorded for the requester, or (none)
// put back for whoever holds the saga next.
void saga_driver::settle_action(std::int64_t id, std::optional<engine::request_result> result) {
  auto record = [this, id, result]() -> asio::awaitable<void> {
    // (Not a conditional expression: GCC 12 mishandles co_await in one.)
    pg::error err;
    if (result)
      err = co_await store_.async_finish_action(id, *result);
    else
      err = co_await store_.async_return_action(id, wall_clock());
    if (err) log::warn("could not record an action's result", {{"action", id}, {"error", err.message}});
  };
  work_.spawn(std::move(record));
}

// Gives up the lease of a saga whose write failed, once the store answers,
// so that a claim (this instance's or another's) recovers it from what is
// durable.
asio::awaitable<void> saga_driver::release(std::string saga_id) {
  for (milliseconds delay(100); co_await work_.async_sleep(delay); delay = std::min(delay * 2, milliseconds(5000)))
    if (!co_await store_.async_release(saga_id)) co_return;
}

}  // namespace tally::orch
