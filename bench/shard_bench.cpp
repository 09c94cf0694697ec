// shard_bench: a load generator for one account_shard. It opens and funds the
// accounts, then sends debits with unique biz_ids over N keep-alive
// connections, closed loop (each connection sends its next debit as soon as
// the previous one is answered) or open loop at a fixed offered rate. Prints
// the throughput every second on stderr and one JSON summary line on stdout.
//   shard_bench [--host=127.0.0.1] [--port=7101] [--token=T] [--tenant=bench]
//               [--accounts=10000] [--connections=64] [--threads=1]
//               [--duration=20] [--warmup=0] [--rate=R] [--per-request=1]
// --token defaults to $TALLY_SHARD_INTERNAL_TOKEN. --rate=0 (the default)
// is closed loop. --warmup=S offers the same load for S seconds first,
// uncounted. --threads runs the connections on that many io_contexts,
// for when one client thread cannot keep the shard busy. --per-request=N>1
// sends N debits per /v1/batch request, as the orchestrator does when it
// coalesces the calls of many sagas to one shard; each debit's latency is
// its request's, and the open-loop rate counts debits.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench/load.hpp"
#include "bench/tool.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// Every account gets the largest amount a command may carry, so a run of
// amount-1 debits never exhausts it.
constexpr std::int64_t funding = 1'000'000'000'000'000;
constexpr std::size_t batch_max_commands = 1000;

struct options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 7101;
  std::string token;
  std::string tenant = "bench";
  std::size_t accounts = 10000;
  tally::bench::load_options load{.name = "shard_bench"};  // its units_per_request: --per-request
};

options parse_options(int argc, char** argv) {
  options o;
  if (const char* t = std::getenv("TALLY_SHARD_INTERNAL_TOKEN")) o.token = t;
  tally::bench::flag_table flags{{"host", &o.host},         {"port", &o.port},
                                 {"token", &o.token},       {"tenant", &o.tenant},
                                 {"accounts", &o.accounts}, {"per-request", &o.load.units_per_request}};
  flags.merge(tally::bench::load_flags(o.load));
  tally::bench::read_flags(argc, argv, flags);
  if (o.token.empty()) throw std::invalid_argument("--token or TALLY_SHARD_INTERNAL_TOKEN is required");
  if (o.accounts == 0 || !tally::bench::load_options_valid(o.load) || o.load.units_per_request == 0)
    throw std::invalid_argument(
        "accounts, connections, threads, duration and per-request must be positive, warmup not negative");
  if (o.load.units_per_request > batch_max_commands)
    throw std::invalid_argument("per-request is at most " + std::to_string(batch_max_commands));
  return o;
}

std::string account_id(std::size_t i) { return "acc-" + std::to_string(i); }

std::size_t occurrences(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

nlohmann::json run(const options& opt) {
  const tally::bench::endpoint shard{opt.host, opt.port, opt.token};
  std::vector<std::string> accounts;
  for (std::size_t i = 0; i < opt.accounts; ++i) accounts.push_back(account_id(i));
  const auto setup_start = clock_type::now();
  tally::bench::set_up_accounts(shard, opt.tenant, accounts, funding);
  const double setup_s = std::chrono::duration<double>(clock_type::now() - setup_start).count();
  std::fprintf(stderr, "shard_bench: %zu accounts opened and funded in %.1f s\n", opt.accounts, setup_s);

  const auto tag = tally::bench::run_tag();
  const std::string prefix = R"({"type":"debit","tenant":")" + opt.tenant + R"(","account_id":")";
  const bool batched = opt.load.units_per_request > 1;
  tally::bench::workload work;
  work.next = [&](std::size_t connection, std::uint64_t& seq, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> pick_account(0, opt.accounts - 1);
    const std::string id_prefix = "d-" + tag + "-" + std::to_string(connection) + "-";
    std::string body = batched ? R"({"commands":[)" : "";
    for (std::size_t i = 0; i < opt.load.units_per_request; ++i, ++seq) {
      if (i > 0) body += ',';
      body += prefix + account_id(pick_account(rng)) + R"(","biz_id":")" + id_prefix + std::to_string(seq) +
              R"(","amount":1})";
    }
    if (batched) body += "]}";
    return tally::bench::request{batched ? "/v1/batch" : "/v1/commands", std::move(body)};
  };
  work.judge = [](const tally::http::response& r) {
    if (r.result_int() != 200) return tally::bench::verdict{0, 0, "http_" + std::to_string(r.result_int())};
    // The shard writes compact JSON; counting substrings keeps the client's
    // CPU for sending rather than parsing.
    return tally::bench::verdict{occurrences(r.body(), R"("status":"succeeded")"),
                                 occurrences(r.body(), R"("status":"rejected")")};
  };
  auto summary = tally::bench::run_load(shard, opt.load, work);
  summary["accounts"] = opt.accounts;
  summary["setup_s"] = setup_s;
  return summary;
}

}  // namespace

int main(int argc, char** argv) { return tally::bench::tool_main("shard_bench", argc, argv, parse_options, run); }
