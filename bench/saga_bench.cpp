// saga_bench: cross-shard transfers through the orchestrator's internal
// API, or with --api-key through the gateway's public API. It
// opens and funds the accounts on their shards (by the same routing the
// orchestrator uses), then starts transfers of 1 unit between two random
// accounts on different shards, each request waiting for its saga to end
// (?wait_ms), over N keep-alive connections, closed loop or open loop at a
// fixed offered rate. A transfer counts when its saga completed; latency is
// start to completed. Prints progress every second on stderr and one JSON
// summary line on stdout.
//   saga_bench --shards=SPEC [--port=7001] [--token=T] [--tenant=bench] [--buckets=1024]
//              [--accounts=1000] [--hot=0] [--connections=64] [--threads=1]
//              [--duration=20] [--warmup=0] [--rate=R] [--units=N] [--wait-ms=10000]
//              [--api-key=K [--subscribers=N]] [--journal=FILE | --replay=FILE]
// --token defaults to $TALLY_ORCH_INTERNAL_TOKEN (the shards take the same
// token; accounts are set up on them). --warmup=S offers the same load for
// S seconds first, uncounted. --hot=F makes a fraction F of the
// transfers move from one hot account (acc-0). With --api-key, --port is the
// gateway's and the key's tenant must be --tenant; --subscribers=N keeps N
// WebSocket subscribers open during the run, 5 accounts each.
// --units=N stops after N transfers (the duration is then an upper bound).
// --journal=FILE writes every answered transfer to FILE (bench/journal.hpp);
// --replay=FILE sends the transfers of such a journal again instead of new
// ones (every hundredth with a changed amount) and counts the answers that
// differ from what the API promises for a replay.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bench/journal.hpp"
#include "bench/load.hpp"
#include "bench/subscribers.hpp"
#include "bench/tool.hpp"
#include "common/sharding/routing.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::int64_t funding = 1'000'000'000'000'000;

struct options {
  std::uint16_t port = 7001;
  std::string token;
  std::string tenant = "bench";
  std::string shards;
  std::size_t buckets = 1024;
  std::size_t accounts = 1000;
  double hot = 0;
  tally::bench::load_options load{.name = "saga_bench"};
  int wait_ms = 10000;
  std::string api_key;
  std::size_t subscribers = 0;
  std::string journal;
  std::string replay;
};

options parse_options(int argc, char** argv) {
  options o;
  if (const char* t = std::getenv("TALLY_ORCH_INTERNAL_TOKEN")) o.token = t;
  tally::bench::flag_table flags{{"port", &o.port},       {"token", &o.token},
                                 {"tenant", &o.tenant},   {"shards", &o.shards},
                                 {"buckets", &o.buckets}, {"accounts", &o.accounts},
                                 {"hot", &o.hot},         {"wait-ms", &o.wait_ms},
                                 {"api-key", &o.api_key}, {"subscribers", &o.subscribers},
                                 {"journal", &o.journal}, {"replay", &o.replay}};
  flags.merge(tally::bench::load_flags(o.load));
  tally::bench::read_flags(argc, argv, flags);
  if (o.token.empty()) throw std::invalid_argument("--token or TALLY_ORCH_INTERNAL_TOKEN is required");
  if (o.shards.empty()) throw std::invalid_argument("--shards is required (the orchestrator's routing)");
  if (!o.journal.empty() && !o.replay.empty()) throw std::invalid_argument("--journal or --replay, not both");
  if (o.accounts < 4 || !tally::bench::load_options_valid(o.load) || o.hot < 0 || o.hot > 1 || o.wait_ms < 0 ||
      o.wait_ms > 30000)
    throw std::invalid_argument("bad accounts, connections, threads, duration, warmup, rate, hot or wait-ms");
  return o;
}

// --replay: the journal's transfers that named a saga, sent again (each
// hundredth changed), and what their answers showed.
class replay_check {
 public:
  void start(const std::string& path, std::size_t connections, tally::bench::workload& work) {
    for (auto& e : tally::bench::read_journal(path))
      if (!e.saga_id.empty()) entries_.push_back(std::move(e));
    std::fprintf(stderr, "saga_bench: replaying %zu transfers\n", entries_.size());
    work.next = [this, connections](std::size_t connection, std::uint64_t& seq,
                                    std::mt19937_64&) -> std::optional<tally::bench::request> {
      const auto i = connection + seq++ * connections;
      if (i >= entries_.size()) return std::nullopt;
      auto sent = entries_[i].sent;
      sent.id = i;
      return changed(i) ? tally::bench::changed_content(sent) : sent;
    };
    // A unit counts as decided here; whether it kept the promise is below.
    work.judge = [](const tally::http::response& r) {
      const int status = r.result_int();
      if (status == 200 || status == 202 || status == 422) return tally::bench::verdict{1, 0};
      return tally::bench::verdict{0, 0, "http_" + std::to_string(status)};
    };
    work.answered = [this](const tally::bench::request& sent, const tally::http::response& answer) {
      auto difference = tally::bench::replay_difference(entries_[sent.id], changed(sent.id), answer);
      std::lock_guard lock(mutex_);
      ++(changed(sent.id) ? changed_ : replayed_);
      if (difference.empty()) return;
      ++differences_;
      if (examples_.size() < 10) examples_.push_back(entries_[sent.id].saga_id + ": " + difference);
    };
  }
  void report(nlohmann::json& summary) const {
    summary["replay_journal"] = entries_.size();
    summary["replayed"] = replayed_;
    summary["replayed_changed"] = changed_;
    summary["replay_differences"] = differences_;
    summary["replay_examples"] = examples_;
  }

 private:
  static bool changed(std::size_t i) { return i % 100 == 99; }

  std::vector<tally::bench::journal_entry> entries_;
  std::mutex mutex_;
  std::uint64_t replayed_ = 0, changed_ = 0, differences_ = 0;
  std::vector<std::string> examples_;
};

nlohmann::json run(const options& opt) {
  auto parsed = tally::sharding::routing_table::parse(opt.shards, opt.buckets);
  if (auto* bad = std::get_if<std::string>(&parsed)) throw std::invalid_argument("--shards: " + *bad);
  const auto& routes = std::get<tally::sharding::routing_table>(parsed);
  // Accounts by shard; acc-0 is the hot one.
  std::vector<std::vector<std::string>> by_shard(routes.shards().size());
  for (std::size_t i = 0; i < opt.accounts; ++i) {
    auto id = "acc-" + std::to_string(i);
    by_shard[routes.shard_of(opt.tenant, id)].push_back(id);
  }
  for (const auto& s : by_shard)
    if (s.empty()) throw std::invalid_argument("every shard needs accounts: raise --accounts");
  const std::string hot = "acc-0";
  const auto hot_shard = routes.shard_of(opt.tenant, hot);

  const auto setup_start = clock_type::now();
  for (std::size_t s = 0; s < by_shard.size(); ++s) {
    const auto& e = routes.shards()[s];
    tally::bench::set_up_accounts({e.host, e.port, opt.token}, opt.tenant, by_shard[s], funding);
  }
  const double setup_s = std::chrono::duration<double>(clock_type::now() - setup_start).count();
  std::fprintf(stderr, "saga_bench: %zu accounts on %zu shards opened and funded in %.1f s\n", opt.accounts,
               by_shard.size(), setup_s);

  const bool public_api = !opt.api_key.empty();
  std::unique_ptr<tally::bench::subscribers> listening;
  if (public_api && opt.subscribers > 0) {
    std::vector<std::string> all;
    for (const auto& s : by_shard) all.insert(all.end(), s.begin(), s.end());
    listening = std::make_unique<tally::bench::subscribers>(opt.port, opt.api_key, opt.subscribers, all, 5);
    std::fprintf(stderr, "saga_bench: %zu of %zu WebSocket subscribers open\n", listening->open(), opt.subscribers);
  }
  const auto tag = tally::bench::run_tag();
  const std::string target = (public_api ? "/v1/transfers" : "/v1/tenants/" + opt.tenant + "/transfers") +
                             "?wait_ms=" + std::to_string(opt.wait_ms);
  tally::bench::workload work;
  work.next = [&](std::size_t connection, std::uint64_t& seq, std::mt19937_64& rng) {
    auto pick = [&](const std::vector<std::string>& from) {
      return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
    };
    // Source and destination on different shards; a hot transfer is from
    // the hot account.
    const bool from_hot = std::uniform_real_distribution<double>(0, 1)(rng) < opt.hot;
    const auto a = from_hot ? hot_shard : std::uniform_int_distribution<std::size_t>(0, by_shard.size() - 1)(rng);
    const auto b = (a + 1 + std::uniform_int_distribution<std::size_t>(0, by_shard.size() - 2)(rng)) % by_shard.size();
    const std::string from = from_hot ? hot : pick(by_shard[a]), to = pick(by_shard[b]);
    const auto biz = "t-" + tag + "-" + std::to_string(connection) + "-" + std::to_string(seq++);
    return tally::bench::request{target, R"({"from_account":")" + from + R"(","to_account":")" + to +
                                             R"(","amount":1,"biz_id":")" + biz + R"("})"};
  };
  work.judge = [](const tally::http::response& r) {
    const auto& body = r.body();
    if (r.result_int() == 202) return tally::bench::verdict{0, 0, "not_finished"};
    if (r.result_int() != 200) return tally::bench::verdict{0, 0, "http_" + std::to_string(r.result_int())};
    if (body.find(R"("state":"completed")") != std::string::npos) return tally::bench::verdict{1, 0};
    return tally::bench::verdict{0, 1};
  };
  std::unique_ptr<tally::bench::journal_writer> journal;
  if (!opt.journal.empty()) {
    journal = std::make_unique<tally::bench::journal_writer>(opt.journal);
    work.answered = [&](const tally::bench::request& sent, const tally::http::response& answer) {
      journal->record(sent, answer);
    };
  }
  replay_check check;
  if (!opt.replay.empty()) check.start(opt.replay, opt.load.connections, work);
  auto summary = tally::bench::run_load({"127.0.0.1", opt.port, public_api ? opt.api_key : opt.token}, opt.load, work);
  if (!opt.replay.empty()) check.report(summary);
  if (listening) {
    summary["subscribers_open"] = listening->open();
    summary["subscriber_frames"] = listening->frames();
  }
  summary["accounts"] = opt.accounts;
  summary["hot"] = opt.hot;
  summary["setup_s"] = setup_s;
  return summary;
}

}  // namespace

int main(int argc, char** argv) { return tally::bench::tool_main("saga_bench", argc, argv, parse_options, run); }
