#pragma once
// The load generator the benchmark tools share: set-up of funded accounts
// on a shard, and a measured run that sends requests over N keep-alive
// connections, closed loop (each connection sends its next request as soon
// as the previous one is answered) or open loop at a fixed offered rate.
// It prints progress every second on stderr and returns a JSON summary
// (throughput, latency percentiles, errors, the client's CPU, per-second
// counts and p99) of the measured phase, which may follow a warm-up.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/server.hpp"

namespace tally::bench {

struct endpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;
};

// Waits for /readyz, then opens every account and credits it `funding`
// with the fixed key "bench-funding" (so a second set-up changes nothing).
void set_up_accounts(const endpoint& shard, const std::string& tenant, const std::vector<std::string>& accounts,
                     std::int64_t funding);

struct load_options {
  std::string name = "bench";  // progress lines start with it
  std::size_t connections = 64;
  std::size_t threads = 1;  // io_contexts, for when one client thread cannot keep the target busy
  double duration_s = 20;
  double rate = 0;  // units per second offered; 0: closed loop
  std::size_t units_per_request = 1;
  // Load offered before the measured duration, and not counted: the first
  // seconds after the set-up are slower than the steady state.
  double warmup_s = 0;
  // Units to send in all, warm-up included, then stop (0: as many as the
  // duration allows).
  std::uint64_t units = 0;
};

struct request {
  std::string target;
  std::string body;
  std::size_t id = 0;  // the workload's own number for it (handed back to `answered`)
};
// How a response counts: units that succeeded, units decided otherwise
// (a business rejection), or an error kind.
struct verdict {
  std::size_t succeeded = 0;
  std::size_t rejected = 0;
  std::string error{};
};
struct workload {
  // The next request of a connection (`seq` counts the units it sent), or
  // none when the connection has nothing more to send.
  std::function<std::optional<request>(std::size_t connection, std::uint64_t& seq, std::mt19937_64& rng)> next;
  std::function<verdict(const http::response&)> judge;
  // When set, told of every answered request (warm-up included) with its
  // answer, from the connections' threads.
  std::function<void(const request&, const http::response&)> answered;
};

nlohmann::json run_load(const endpoint& target, const load_options& options, const workload& work);

// Unique per run, so repeated runs against one database never replay a key.
std::string run_tag();

// Whether connections, threads and duration are positive, warmup and rate not negative.
bool load_options_valid(const load_options& o);

}  // namespace tally::bench
