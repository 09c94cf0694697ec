// A seeded, deterministic simulation of the saga engine against two model
// shards that run account_shard's own decision code (ledger/decide.cpp), in
// the spirit of TigerBeetle's simulator. Faults: requests and replies lost,
// requests duplicated, replies late past the call timeout, shards down for
// a while, accounts frozen for a while, the orchestrator crashing (it then
// knows only what it persisted before sending each call) and restarting.
// The app confirms, cancels or forgets held deductions. After each seed: every saga terminal (promise 5),
// one effect per key and balance = ledger (promise 2, 3), conservation and
// no held value left (promise 4), and each saga's effects match its end
// state.
//
//   TALLY_SIM_SEEDS=N   how many seeds (default 1000)
//   TALLY_SIM_SEED=S    run only seed S (to replay a failure)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <queue>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"
#include "account_shard/ledger/decide.hpp"
#include "common/contract/saga_id.hpp"
#include "orchestrator/saga/codec.hpp"
#include "orchestrator/transport/shard_call.hpp"

namespace tally::orch {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using ms = std::chrono::milliseconds;

constexpr int shards = 2;
constexpr int accounts_per_shard = 10;
constexpr std::int64_t opening = 200;
const std::string tenant = "sim";

std::string account_name(int i) { return "acc-" + std::to_string(i); }
int shard_of(const std::string& account) { return std::stoi(account.substr(4)) % shards; }

// One account_shard: its decisions are the real ones, kept across commands.
struct model_shard {
  shard::batch_state state;
  bool up = true;

  model_shard() {
    for (std::int64_t i = 1; i <= 100'000; ++i) state.free_seqs.push_back(i);
  }
  json run(const json& command) {
    auto parsed = shard::parse_command(command);
    if (auto* bad = std::get_if<shard::invalid_command>(&parsed))
      throw std::logic_error("the orchestrator sent an invalid command: " + bad->message + " " + command.dump());
    return json::parse(contract::to_json_text(state.decide(std::get<shard::command>(parsed))));
  }
  const shard::account_row& account(const std::string& id) const {
    return state.accounts.at(shard::batch_state::account_key(tenant, id));
  }
  const shard::operation_row* operation(const std::string& account, const std::string& type,
                                        const std::string& id) const {
    auto it = state.operations.find(shard::op_key{tenant, account, type, id}.flat());
    return it == state.operations.end() ? nullptr : &it->second;
  }
};

struct sim_saga {
  saga live;
  json durable;          // what the orchestrator persisted last (null: nothing yet)
  bool created = false;  // the saga exists durably
  std::string kind;      // workflow name
  int incarnation = 0;   // of the orchestrator that holds `live`
  ms timeout{0};         // a transfer's own deadline from its start; 0: the workflow's
};

enum class ev { start, wake, arrive, reply, app, crash, restart, shard_down, shard_up, freeze, unfreeze, refunds };

struct event {
  ms at;
  std::uint64_t seq;
  ev what;
  std::size_t saga = 0;
  int incarnation = 0;
  call_ref ref{};
  json command{};
  answer a{};
  int shard = 0;
  int app_action = 0;  // 0 confirm, 1 cancel
  bool operator>(const event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

// What the seeds did, for the summary line (and to see that faults happen).
struct tally_of_runs {
  std::map<std::string, std::uint64_t> sagas_by_end;  // "transfer compensated" -> n
  std::uint64_t crashes = 0, outages = 0, freezes = 0, lost = 0, duplicated = 0, late = 0, calls = 0, busy = 0;
};

class simulation {
 public:
  simulation(std::uint64_t seed, tally_of_runs& stats) : rng_(seed), busy_rng_(~seed), shards_(shards), stats_(stats) {}

  // Runs the seed; returns the first broken promise, or "".
  std::string run() {
    for (int a = 0; a < shards * accounts_per_shard; ++a) {
      auto id = account_name(a);
      auto& sh = shards_[shard_of(id)];
      sh.run({{"type", "open_account"}, {"tenant", tenant}, {"account_id", id}});
      sh.run({{"type", "credit"}, {"tenant", tenant}, {"account_id", id}, {"biz_id", "opening"}, {"amount", opening}});
    }
    const int count = 50 + pick(0, 20);
    for (int i = 0; i < count; ++i) add_saga(ms(pick(0, 3000)));
    // Crashes while the sagas run (they start in the first 3 s), and later.
    for (int c = pick(0, 3); c > 0; --c) push({ms(pick(0, chance(0.5) ? 4000 : 20000)), 0, ev::crash});
    for (int s = 0; s < shards; ++s)
      for (int o = pick(0, 2); o > 0; --o) {
        auto from = ms(pick(0, 20000));
        push({from, 0, ev::shard_down, 0, 0, {}, {}, {}, s});
        push({from + ms(pick(50, 4000)), 0, ev::shard_up, 0, 0, {}, {}, {}, s});
      }
    // An operator freezes an account for a while (a reconciliation finding).
    for (int f = pick(0, 2); f > 0; --f) {
      const int account = pick(0, shards * accounts_per_shard - 1);
      const auto from = ms(pick(0, 20000));
      push({from, 0, ev::freeze, static_cast<std::size_t>(account)});
      push({from + ms(pick(100, 5000)), 0, ev::unfreeze, static_cast<std::size_t>(account)});
    }
    push({ms(25000), 0, ev::refunds});
    std::uint64_t same_instant = 0;
    while (!queue_.empty()) {
      auto e = queue_.top();
      queue_.pop();
      same_instant = e.at == now_ ? same_instant + 1 : 0;
      now_ = e.at;
      if (now_ > ms(3'600'000)) return "still running after an hour of simulated time";
      if (same_instant > 100'000) {
        const auto& g = sagas_[e.saga].live;
        return "livelock: saga " + g.id + " (" + sagas_[e.saga].kind + ", " + std::string(to_string(g.state)) +
               ", stage " + std::string(to_string(g.stage)) + ", cursor " + std::to_string(g.cursor) +
               ") keeps getting events at the same instant (event " + std::to_string(static_cast<int>(e.what)) +
               ", wake " +
               (g.wake ? std::to_string(std::chrono::duration_cast<ms>(*g.wake - at(now_)).count()) : "none") +
               " ms from now, progress " + progress_to_json(g).dump() + ")";
      }
      handle(e);
    }
    return check();
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  instant at(ms t) const { return instant{std::chrono::milliseconds(1'700'000'000'000) + t}; }
  void push(event e) {
    e.seq = next_seq_++;
    queue_.push(std::move(e));
  }
  engine engine_for(const std::string& w) {
    return engine(*find_workflow(w), [this] { return std::uniform_real_distribution<double>(0, 1)(rng_); });
  }

  std::string new_id() {
    std::array<std::uint8_t, 10> random;
    for (auto& b : random) b = static_cast<std::uint8_t>(pick(0, 255));
    return contract::new_saga_id(at(now_), random);
  }

  std::string random_account() {
    // A third of the sagas touch the hot account.
    return chance(0.33) ? account_name(0) : account_name(pick(0, shards * accounts_per_shard - 1));
  }

  void add_saga(ms when) {
    sim_saga s;
    auto& g = s.live;
    g.id = new_id();
    g.tenant = tenant;
    g.biz_id = "b" + std::to_string(sagas_.size());
    const int roll = pick(0, 99);
    if (roll < 12) {
      s.kind = "credit";
      g.input.account = random_account();
      g.input.amount = pick(1, 50);
    } else if (roll < 30) {
      s.kind = "deduct";
      g.input.account = random_account();
      g.input.amount = pick(1, 80);
    } else if (roll < 48) {
      s.kind = "deduct_held";
      g.input.account = random_account();
      g.input.amount = pick(1, 80);
      g.input.hold_timeout = ms(pick(200, 3000));
    } else if (roll < 88) {
      s.kind = "transfer";
      g.input.source = random_account();
      do g.input.destination = random_account();
      while (g.input.destination == g.input.source);
      g.input.amount = pick(1, 80);
      // Half of them with a short deadline, which a crash and a restart
      // (or an outage) can outlast: recovery then compensates.
      if (chance(0.5)) s.timeout = ms(pick(20, 2000));
    } else {
      s.kind = "batch_deduct";
      std::set<std::string> used;
      for (int n = pick(1, 6); n > 0; --n) {
        auto a = random_account();
        if (used.insert(a).second) g.input.items.push_back({a, pick(1, 40)});
      }
    }
    sagas_.push_back(std::move(s));
    push({when, 0, ev::start, sagas_.size() - 1});
  }

  // The write-ahead rule: the saga's new state is durable before any call
  // it decided is sent.
  void persist_and_send(std::size_t i, const decision& d) {
    auto& s = sagas_[i];
    // As the runner does: forward-only calls after the pivot go before
    // their state is written; it is written with the saga's next change.
    const auto& w = *find_workflow(s.kind);
    const bool deferred = !d.send.empty() && !is_terminal(s.live.state) &&
                          std::all_of(d.send.begin(), d.send.end(), [&](const outgoing_call& c) {
                            return !c.ref.undo && w.sendable_before_saving(c.ref.step);
                          });
    if (!deferred)
      s.durable = {{"input", input_to_json(s.live.input)},
                   {"progress", progress_to_json(s.live)},
                   {"state", to_string(s.live.state)},
                   {"error", s.live.error ? json{{"code", s.live.error->code}, {"message", s.live.error->message}}
                                          : json(nullptr)},
                   {"attention", s.live.attention},
                   {"created", s.live.created.time_since_epoch().count()},
                   {"deadline", s.live.deadline.time_since_epoch().count()},
                   {"wake", s.live.wake ? json(s.live.wake->time_since_epoch().count()) : json(nullptr)}};
    s.created = s.created || !deferred;
    for (const auto& c : d.send) send(i, c);
    if (s.live.wake) {
      const auto offset = std::chrono::duration_cast<ms>(*s.live.wake - at(ms(0)));
      push({std::max(now_, offset), 0, ev::wake, i, s.incarnation});
    }
  }

  saga reload(std::size_t i) {
    const auto& d = sagas_[i].durable;
    saga g;
    g.id = sagas_[i].live.id;
    g.tenant = tenant;
    g.biz_id = sagas_[i].live.biz_id;
    g.workflow = sagas_[i].kind;
    g.input = input_from_json(d["input"]);
    std::string error;
    if (!progress_from_json(d["progress"], g, error)) throw std::logic_error(error);
    g.state = *saga_state_from(d["state"].get<std::string>());
    if (!d["error"].is_null()) g.error = saga_error{d["error"]["code"], d["error"]["message"]};
    g.attention = d["attention"];
    g.created = instant{ms(d["created"].get<std::int64_t>())};
    g.deadline = instant{ms(d["deadline"].get<std::int64_t>())};
    if (!d["wake"].is_null()) g.wake = instant{ms(d["wake"].get<std::int64_t>())};
    return g;
  }

  void send(std::size_t i, const outgoing_call& c) {
    ++stats_.calls;
    if (chance(0.05)) {  // the request is lost
      ++stats_.lost;
      return;
    }
    const auto command = contract::to_json(shard_command(c, tenant));
    const int sh = shard_of(c.account);
    if (!shards_[sh].up) {  // connection refused: this attempt never leaves, so it has no copies
      push({now_ + ms(pick(1, 5)),
            0,
            ev::reply,
            i,
            sagas_[i].incarnation,
            c.ref,
            {},
            answer{answer_kind::not_delivered, "unreachable"}});
      return;
    }
    push({now_ + ms(pick(1, 30)), 0, ev::arrive, i, sagas_[i].incarnation, c.ref, command, {}, sh});
    if (chance(0.03)) {
      ++stats_.duplicated;
      push({now_ + ms(pick(1, 400)), 0, ev::arrive, i, sagas_[i].incarnation, c.ref, command, {}, sh});
    }
  }

  void handle(const event& e) {
    switch (e.what) {
      case ev::start: {
        if (down_) {  // the app's request found no orchestrator: it retries later
          push({now_ + 100ms, 0, ev::start, e.saga});
          return;
        }
        auto& s = sagas_[e.saga];
        if (s.created) return;
        s.incarnation = incarnation_;
        if (s.timeout > ms(0)) s.live.deadline = at(now_ + s.timeout);
        auto d = engine_for(s.kind).start(s.live, at(now_));
        persist_and_send(e.saga, d);
        if (s.kind == "deduct_held" && chance(0.7))
          push({now_ + ms(pick(0, 4000)), 0, ev::app, e.saga, 0, {}, {}, {}, 0, chance(0.5) ? 0 : 1});
        return;
      }
      case ev::arrive: {
        auto& sh = shards_[e.shard];
        answer a;
        if (!sh.up) {  // it went down with the request on its way: the outcome is unknown
          a = {answer_kind::transport, "connection_reset"};
        } else if (std::uniform_real_distribution<double>(0, 1)(busy_rng_) < 0.04) {
          // Its account's queue is past the shard's safe wait: refused, nothing decided or stored.
          ++stats_.busy;
          const json refusal{{"status", "unavailable"},
                             {"code", "account_busy"},
                             {"retry_after_ms", std::uniform_int_distribution<int>(1, 50)(busy_rng_)}};
          a = answer_from_result(refusal);
        } else {
          a = answer_from_result(sh.run(e.command));
          if (chance(0.05)) {  // the reply is lost: the effect stays
            ++stats_.lost;
            return;
          }
        }
        const bool late = chance(0.03);  // past the call timeout
        stats_.late += late ? 1 : 0;
        const auto latency = late ? ms(pick(2100, 3000)) : ms(pick(1, 30));
        push({now_ + latency, 0, ev::reply, e.saga, e.incarnation, e.ref, {}, a});
        return;
      }
      case ev::reply: {
        auto& s = sagas_[e.saga];
        if (down_ || e.incarnation != s.incarnation) return;  // sent by an orchestrator that died
        auto d = engine_for(s.kind).on_answer(s.live, e.ref, e.a, at(now_));
        persist_and_send(e.saga, d);
        return;
      }
      case ev::wake: {
        auto& s = sagas_[e.saga];
        if (down_ || e.incarnation != s.incarnation || !s.live.wake || at(now_) < *s.live.wake) return;
        auto d = engine_for(s.kind).on_wake(s.live, at(now_));
        persist_and_send(e.saga, d);
        return;
      }
      case ev::app: {
        auto& s = sagas_[e.saga];
        if (down_ || !s.created) {
          push({now_ + 100ms, 0, ev::app, e.saga, 0, {}, {}, {}, 0, e.app_action});
          return;
        }
        decision d;
        auto eng = engine_for(s.kind);
        if (e.app_action == 0)
          eng.confirm(s.live, at(now_), d);
        else
          eng.cancel(s.live, at(now_), d);
        persist_and_send(e.saga, d);
        return;
      }
      case ev::crash:
        if (down_) return;
        ++stats_.crashes;
        down_ = true;
        ++incarnation_;
        push({now_ + ms(pick(50, 1500)), 0, ev::restart});
        return;
      case ev::restart:
        down_ = false;
        for (std::size_t i = 0; i < sagas_.size(); ++i) {
          auto& s = sagas_[i];
          if (!s.created) continue;
          s.live = reload(i);  // only what was persisted survives
          s.incarnation = incarnation_;
          if (is_terminal(s.live.state)) continue;
          // Recovery claims every saga and re-sends what was in flight.
          auto d = engine_for(s.kind).recover(s.live, at(now_));
          persist_and_send(i, d);
        }
        return;
      case ev::shard_down:
        stats_.outages += shards_[e.shard].up ? 1 : 0;
        shards_[e.shard].up = false;
        return;
      case ev::shard_up: shards_[e.shard].up = true; return;
      case ev::freeze:
      case ev::unfreeze: {
        // e.saga carries the account's number here.
        const auto id = account_name(static_cast<int>(e.saga));
        auto& acc = shards_[shard_of(id)].state.accounts.at(shard::batch_state::account_key(tenant, id));
        acc.status = e.what == ev::freeze ? shard::account_status::frozen : shard::account_status::active;
        stats_.freezes += e.what == ev::freeze ? 1 : 0;
        return;
      }
      case ev::refunds: start_refunds(); return;
    }
  }

  // Refunds of completed deductions and transfers (some asking too much).
  void start_refunds() {
    const auto originals = sagas_.size();
    for (std::size_t i = 0; i < originals; ++i) {
      const auto& o = sagas_[i];
      if (o.live.state != saga_state::completed || !chance(0.5)) continue;
      sim_saga r;
      auto& g = r.live;
      g.id = new_id();
      g.tenant = tenant;
      g.biz_id = "r" + std::to_string(sagas_.size());
      g.input.original_saga_id = o.live.id;
      g.input.original_key = step_key(o.live);
      g.input.amount = pick(1, static_cast<int>(o.live.input.amount) + 10);
      if (o.kind == "deduct" || o.kind == "deduct_held") {
        r.kind = "refund";
        g.input.account = o.live.input.account;
        g.input.original_type = o.kind == "deduct" ? "debit" : "capture";
      } else if (o.kind == "transfer") {
        r.kind = "refund_transfer";
        g.input.source = o.live.input.source;
        g.input.destination = o.live.input.destination;
        g.input.original_type = "capture";
      } else {
        continue;
      }
      sagas_.push_back(std::move(r));
      push({now_ + ms(pick(0, 2000)), 0, ev::start, sagas_.size() - 1});
    }
  }

  std::string check() {
    std::int64_t expected = 0, balances = 0, held = 0;
    for (int a = 0; a < shards * accounts_per_shard; ++a) {
      const auto id = account_name(a);
      const auto& sh = shards_[shard_of(id)];
      const auto& acc = sh.account(id);
      balances += acc.balance;
      held += acc.held;
      expected += opening;
      if (acc.balance < 0 || acc.held < 0 || acc.balance < acc.held) return id + " is overdrawn";
      std::int64_t ledger = 0;
      for (const auto& l : sh.state.ledger)
        if (l.key.account_id == id) ledger += l.delta;
      if (ledger != acc.balance)
        return id + ": balance " + std::to_string(acc.balance) + " but ledger " + std::to_string(ledger);
    }
    for (const auto& sh : shards_) {
      std::set<std::string> keys;
      for (const auto& l : sh.state.ledger)
        if (!keys.insert(l.key.flat()).second) return "two ledger effects for one key: " + l.key.biz_id;
    }
    auto effect = [&](const std::string& account, const std::string& type, const std::string& id) {
      const auto* op = shards_[shard_of(account)].operation(account, type, id);
      return op && op->state == shard::op_state::succeeded;
    };
    for (const auto& s : sagas_) {
      const auto& g = s.live;
      const auto where = "saga " + g.id + " (" + s.kind + ", " + std::string(to_string(g.state)) + ", progress " +
                         progress_to_json(g).dump() + "): ";
      if (!s.created) return where + "never started";
      if (!is_terminal(g.state)) return where + "not terminal";
      const bool done = g.state == saga_state::completed;
      const auto key = step_key(g);
      const auto& in = g.input;
      if (s.kind == "credit") {
        if (effect(in.account, "credit", key) != done) return where + "credit effect does not match";
        if (done) expected += in.amount;
      } else if (s.kind == "deduct") {
        if (effect(in.account, "debit", key) != done) return where + "debit effect does not match";
        if (done) expected -= in.amount;
      } else if (s.kind == "deduct_held") {
        if (effect(in.account, "capture", key) != done) return where + "capture does not match";
        if (done) expected -= in.amount;
      } else if (s.kind == "transfer") {
        if (effect(in.destination, "credit", key) != done) return where + "destination credit does not match";
        if (effect(in.source, "capture", key) != done) return where + "source capture does not match";
      } else if (s.kind == "batch_deduct") {
        for (const auto& item : in.items) {
          if (effect(item.account, "capture", key) != done) return where + "item " + item.account + " does not match";
          if (done) expected -= item.amount;
        }
      } else if (s.kind == "refund") {
        if (effect(in.account, "refund", key) != done) return where + "refund effect does not match";
        if (done) expected += in.amount;
      } else if (s.kind == "refund_transfer") {
        if (effect(in.source, "refund", key) != done) return where + "refund does not match";
        if (effect(in.destination, "capture", key) != done) return where + "destination capture does not match";
      }
    }
    for (const auto& s : sagas_) ++stats_.sagas_by_end[s.kind + " " + std::string(to_string(s.live.state))];
    if (held != 0) return "value left held with every saga terminal: " + std::to_string(held);
    if (balances != expected)
      return "conservation: balances " + std::to_string(balances) + ", expected " + std::to_string(expected);
    return "";
  }

  std::mt19937_64 rng_;
  // Whether a shard refuses a command account_busy: drawn apart, so that
  // the other faults are drawn as they were before busy refusals existed.
  std::mt19937_64 busy_rng_;
  std::vector<model_shard> shards_;
  std::vector<sim_saga> sagas_;
  std::priority_queue<event, std::vector<event>, std::greater<>> queue_;
  std::uint64_t next_seq_ = 0;
  ms now_{0};
  bool down_ = false;
  int incarnation_ = 0;
  tally_of_runs& stats_;
};

TEST(Simulation, EveryPromiseHoldsUnderFaults) {
  std::uint64_t first = 1, seeds = 1000;
  if (const char* n = std::getenv("TALLY_SIM_SEEDS")) seeds = std::stoull(n);
  if (const char* one = std::getenv("TALLY_SIM_SEED")) first = std::stoull(one), seeds = 1;
  tally_of_runs stats;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    std::string broken;
    try {
      broken = simulation(seed, stats).run();
    } catch (const std::exception& e) {
      broken = std::string("exception: ") + e.what();
    }
    if (!broken.empty()) {
      ADD_FAILURE() << "seed " << seed << ": " << broken << "\n  replay: TALLY_SIM_SEED=" << seed
                    << " build/ci/tests/orchestrator/orchestrator_simulation_test";
      return;
    }
  }
  std::string ends;
  for (const auto& [what, n] : stats.sagas_by_end) ends += "\n    " + what + ": " + std::to_string(n);
  std::printf(
      "simulation: %llu seeds, %llu calls (%llu lost, %llu duplicated, %llu late, %llu refused account_busy), %llu "
      "orchestrator crashes, %llu shard outages, %llu account freezes; sagas by end state:%s\n",
      static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(stats.calls),
      static_cast<unsigned long long>(stats.lost), static_cast<unsigned long long>(stats.duplicated),
      static_cast<unsigned long long>(stats.late), static_cast<unsigned long long>(stats.busy),
      static_cast<unsigned long long>(stats.crashes), static_cast<unsigned long long>(stats.outages),
      static_cast<unsigned long long>(stats.freezes), ends.c_str());
}

}  // namespace
}  // namespace tally::orch
