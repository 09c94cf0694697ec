#include "orchestrator/service/saga_runner.hpp"

#include <openssl/rand.h>

#include <array>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/contract/saga_id.hpp"
#include "common/log/log.hpp"
#include "orchestrator/service/lease_keeper.hpp"

namespace tally::orch {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

saga_runner::outcome outcome_of(engine::request_result r) {
  switch (r) {
    case engine::request_result::done: return saga_runner::outcome::done;
    case engine::request_result::already: return saga_runner::outcome::already;
    case engine::request_result::invalid_state: return saga_runner::outcome::invalid_state;
  }
  return saga_runner::outcome::invalid_state;
}

saga_runner::result store_unavailable() {
  return {saga_runner::outcome::unavailable, std::nullopt, "the saga store is unavailable"};
}

}  // namespace

saga_runner::saga_runner(asio::any_io_executor ex, saga_store& store, const sharding::routing_table& routes,
                         std::vector<std::unique_ptr<shard_client>>& shards, metrics::registry& metrics,
                         runner_options options)
    : ex_(ex),
      store_(store),
      options_(options),
      work_(ex),
      claiming_(ex),
      driver_(ex, store, routes, shards, metrics, {options.keep_horizon, options.save_batch, options.save_connections},
              work_),
      claimer_(ex, store, options.claim_batch, options.claim_interval,
               [this](saga_store::load_result claim) { driver_.take_claimed(std::move(claim)); }),
      remote_(ex, store, options.action_recheck),
      listener_(ex, store.conninfo(), {std::string(action_requested_channel), std::string(action_settled_channel)},
                {[this](std::string_view channel, std::string_view payload) {
                   if (channel == action_settled_channel)
                     remote_.settled(payload);
                   else
                     claimer_.wake();
                 },
                 [this] {
                   remote_.recheck_all();
                   claimer_.wake();
                 }}),
      started_(metrics.add_counter("tally_orch_sagas_started_total", "Sagas created by this instance")),
      replayed_(
          metrics.add_counter("tally_orch_sagas_replayed_total", "Start requests answered with an existing saga")),
      metrics_(metrics) {}

saga_runner::~saga_runner() { driver_.let_all_go(); }

asio::awaitable<pg::error> saga_runner::async_open() { co_return co_await store_.async_renew(wall_clock()); }

void saga_runner::start() {
  claiming_.spawn([this] { return claimer_.async_run(claiming_); });
  claiming_.spawn([this] { return async_keep_leases(store_, options_.lease, claiming_); });
  claiming_.spawn([this] { return async_maintain_store(store_, options_.maintenance, metrics_, claiming_); });
  work_.spawn([this] { return listener_.async_run(); });
}

asio::awaitable<void> saga_runner::async_stop(milliseconds grace) {
  stopping_ = true;
  claiming_.stop();
  const auto until = std::chrono::steady_clock::now() + grace;
  asio::steady_timer pause(ex_);
  while ((claiming_.running() > 0 || driver_.busy()) && std::chrono::steady_clock::now() < until) {
    pause.expires_after(milliseconds(20));
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  // A renewal still under way would write the heartbeat again after the
  // release: the claimer and the lease keeper end first.
  co_await claiming_.async_join();
  if (auto err = co_await store_.async_release_all())
    log::warn("could not release leases; other instances take the sagas when they expire", {{"error", err.message}});
  driver_.let_all_go();
  listener_.stop();
  work_.stop();
  co_await work_.async_join();
}

// ---- starting -----------------------------------------------------------

asio::awaitable<saga_runner::result> saga_runner::resolve_refund(saga_request& r) {
  auto got = co_await store_.async_get(r.input.original_saga_id);
  if (got.error) co_return store_unavailable();
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
  if (stopping_) co_return result{outcome::unavailable, std::nullopt, "the orchestrator is shutting down"};
  if (request.type == saga_type::refund) {
    auto resolved = co_await resolve_refund(request);
    if (resolved.kind != outcome::created) co_return resolved;
  }
  const auto t = wall_clock();
  auto used_for_another = [&] {
    return "biz_id " + request.biz_id + " was used for another " + std::string(to_string(request.type));
  };
  if (request.input.expires_at && *request.input.expires_at <= unix_ms(t)) {
    // A new credit must expire later than now; a replay of one accepted
    // before its expiry stays a replay.
    saga_filter key{request.tenant, request.type, request.biz_id};
    auto found = co_await store_.async_list(std::move(key));
    if (found.error) co_return store_unavailable();
    if (found.sagas.empty()) co_return result{outcome::invalid, std::nullopt, "expires_at must be later than now"};
    auto existing = std::move(found.sagas.front());
    if (existing.request_hash != request.request_hash)
      co_return result{outcome::conflict, std::move(existing), used_for_another()};
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

  auto begun = co_await driver_.async_begin(s, request.type, request.request_hash);
  if (begun.error) co_return store_unavailable();
  if (!begun.live) {
    auto found = co_await store_.async_existing(request.tenant, request.type, request.biz_id, request.request_hash);
    if (found.error) co_return store_unavailable();
    auto& existing = found.saga;
    if (found.outcome == saga_store::created::conflict)
      co_return result{outcome::conflict, std::move(existing), used_for_another()};
    replayed_.inc();
    // The live copy is fresher while this instance drives it.
    if (auto l = driver_.find(existing.s.id)) co_return result{outcome::replayed, l->snapshot()};
    co_return result{outcome::replayed, std::move(existing)};
  }
  started_.inc();
  co_return result{outcome::created, begun.live->snapshot()};
}

// ---- reading and acting -------------------------------------------------

asio::awaitable<saga_runner::result> saga_runner::async_get(std::string tenant, std::string saga_id, milliseconds wait,
                                                            bool or_awaiting) {
  auto settled = [or_awaiting](saga_state s) {
    return is_terminal(s) || (or_awaiting && s == saga_state::awaiting_confirmation);
  };
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const bool last = std::chrono::steady_clock::now() >= until;
    if (auto l = driver_.find(saga_id)) {
      if (l->s->tenant != tenant) co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
      if (last || settled(l->s->state)) co_return result{outcome::done, l->snapshot()};
      asio::steady_timer changed(ex_, until);
      l->waiters.push_back(&changed);
      boost::system::error_code ec;
      co_await changed.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      std::erase(l->waiters, &changed);
      if (l->gone && settled(l->s->state)) co_return result{outcome::done, l->snapshot()};
      continue;
    }
    auto got = co_await store_.async_get(saga_id);
    if (got.error) co_return store_unavailable();
    if (got.sagas.empty() || got.sagas[0].s.tenant != tenant)
      co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
    if (last || settled(got.sagas[0].s.state)) co_return result{outcome::done, std::move(got.sagas[0])};
    // Held elsewhere: poll the store.
    asio::steady_timer pause(ex_, std::min(until, std::chrono::steady_clock::now() + milliseconds(25)));
    boost::system::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

// The saga ended before the action was taken: nothing to write, the engine
// only judges the request.
saga_runner::result saga_runner::judge_finished(stored_saga st, saga_action action) const {
  auto copy = st.s;
  decision d;
  auto r = apply_action(driver_.flow_of(copy).eng, copy, action, wall_clock(), d);
  return result{outcome_of(r), std::move(st)};
}

asio::awaitable<saga_runner::result> saga_runner::async_act(std::string tenant, std::string saga_id,
                                                            saga_action action) {
  if (auto l = driver_.find(saga_id); l && !stopping_) {
    if (l->s->tenant != tenant) co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
    auto w = std::make_shared<action_wait>(ex_);
    w->timer.expires_after(options_.action_timeout);
    saga_event e;
    e.what = saga_event::kind::action;
    e.action = action;
    e.waiter = w;
    driver_.post(l, std::move(e));
    boost::system::error_code ec;
    co_await w->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (w->result) co_return result{outcome_of(*w->result), l->snapshot()};
    // Let go or lost meanwhile: act through the store like any other instance.
  }
  auto got = co_await store_.async_get(saga_id);
  if (got.error) co_return store_unavailable();
  if (got.sagas.empty() || got.sagas[0].s.tenant != tenant)
    co_return result{outcome::not_found, std::nullopt, "no saga " + saga_id};
  auto st = std::move(got.sagas[0]);
  if (is_terminal(st.s.state)) co_return judge_finished(std::move(st), action);
  if (stopping_) co_return result{outcome::unavailable, std::nullopt, "the orchestrator is shutting down"};
  co_return co_await act_elsewhere(std::move(st), action);
}

asio::awaitable<saga_runner::result> saga_runner::act_elsewhere(stored_saga st, saga_action action) {
  auto settled = co_await remote_.async_request(st.s.id, action, options_.action_timeout);
  if (settled.error) co_return store_unavailable();
  auto now_held = co_await async_get(st.s.tenant, st.s.id, milliseconds(0));
  if (settled.result) {
    now_held.kind = outcome_of(*settled.result);
    co_return now_held;
  }
  // It ended before anyone took the action: judge it as on any finished saga.
  if (now_held.saga && is_terminal(now_held.saga->s.state)) co_return judge_finished(std::move(*now_held.saga), action);
  co_return result{outcome::unavailable, std::nullopt, "the saga could not be updated in time; retry"};
}

}  // namespace tally::orch
