#include "bench/load.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bench/asio.hpp"
#include "common/http/client.hpp"

namespace tally::bench {

namespace {

using namespace std::chrono_literals;

constexpr auto request_timeout = 15s;

struct connection_result {
  std::vector<std::uint32_t> latencies_us;  // every decided unit (succeeded or rejected)
  std::vector<std::uint32_t> sent_second;   // per latency: the second of the measured phase it was sent in
  std::uint64_t succeeded = 0;
  std::uint64_t rejected = 0;
  std::map<std::string, std::uint64_t> errors;  // by kind
  clock_type::time_point finished;
};

// Read by the progress reporter while connections on other threads write.
struct live_counters {
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::size_t> running{0};
  std::atomic<std::uint64_t> issued{0};  // units sent, warm-up included
};

// Requests go out from `start` to `end`; those sent before `measured_from`
// (the warm-up) are not counted.
asio::awaitable<void> run_connection(const endpoint& target, const load_options& opt, const workload& work,
                                     std::size_t index, clock_type::time_point start,
                                     clock_type::time_point measured_from, clock_type::time_point end,
                                     connection_result& out, live_counters& live) {
  auto ex = co_await asio::this_coro::executor;
  tally::http::client client(ex, target.host, target.port);
  asio::steady_timer pacer(ex);
  std::mt19937_64 rng(index + 1);
  const bool open_loop = opt.rate > 0;
  // Open loop: connection k owns slots k, k+N, k+2N, ... of one global
  // schedule of requests, so the connections together offer `rate` units/s.
  const double request_rate = opt.rate / static_cast<double>(opt.units_per_request);
  const auto interval = open_loop ? std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(
                                        static_cast<double>(opt.connections) / request_rate))
                                  : clock_type::duration::zero();
  auto due = open_loop ? start + std::chrono::duration_cast<clock_type::duration>(
                                     std::chrono::duration<double>(static_cast<double>(index) / request_rate))
                       : start;
  out.latencies_us.reserve(std::min<std::size_t>(static_cast<std::size_t>(opt.duration_s * 1000), 1 << 20));
  if (!open_loop) {
    // Every connection starts at `start`, so that its first request is measured too.
    pacer.expires_at(start);
    co_await pacer.async_wait(asio::use_awaitable);
  }

  for (std::uint64_t seq = 0;;) {
    auto sent = clock_type::now();
    if (open_loop) {
      // Past the end nothing more is offered, even when the target fell
      // behind the schedule.
      if (due >= end || sent >= end) break;
      if (due > sent) {
        pacer.expires_at(due);
        co_await pacer.async_wait(asio::use_awaitable);
      }
      // Latency counts from the scheduled time: a unit that waits for its
      // connection waits for the target, and hiding that would flatter p99.
      sent = due;
      due += interval;
    } else if (sent >= end) {
      break;
    }
    if (opt.units > 0 && live.issued.fetch_add(opt.units_per_request) >= opt.units) break;
    auto req = work.next(index, seq, rng);
    if (!req) break;
    auto kept = work.answered ? *req : request{};
    auto r = co_await client.async_json(bhttp::verb::post, std::move(req->target), std::move(req->body),
                                        request_timeout, target.token);
    auto latency = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - sent).count();
    if (!r.error && work.answered) work.answered(kept, r.message);
    if (sent < measured_from) continue;
    verdict v;
    if (r.error)
      v.error = r.error == asio::error::timed_out ? "timeout" : "transport";
    else
      v = work.judge(r.message);
    if (v.error.empty() && v.succeeded + v.rejected != opt.units_per_request) v.error = "reply_not_decided";
    if (v.error.empty()) {
      out.succeeded += v.succeeded;
      out.rejected += v.rejected;
      live.succeeded.fetch_add(v.succeeded, std::memory_order_relaxed);
      live.rejected.fetch_add(v.rejected, std::memory_order_relaxed);
      out.latencies_us.insert(out.latencies_us.end(), opt.units_per_request,
                              static_cast<std::uint32_t>(std::min<std::int64_t>(latency, UINT32_MAX)));
      out.sent_second.insert(out.sent_second.end(), opt.units_per_request,
                             static_cast<std::uint32_t>(std::max<std::int64_t>(
                                 0, std::chrono::duration_cast<std::chrono::seconds>(sent - measured_from).count())));
    } else {
      out.errors[v.error] += opt.units_per_request;
      live.errors.fetch_add(opt.units_per_request, std::memory_order_relaxed);
    }
  }
  out.finished = clock_type::now();
}

// per_second[i]: units that succeeded in second i+1 after the start; the
// last entry holds the drain of the units in flight at the deadline.
asio::awaitable<void> report_progress(const std::string& name, clock_type::time_point start, live_counters& live,
                                      std::vector<std::uint64_t>& per_second) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  tick.expires_at(start);
  co_await tick.async_wait(asio::use_awaitable);
  // The benchmark scripts wait for this line to read the CPU used so far.
  std::fprintf(stderr, "%s: measuring\n", name.c_str());
  std::uint64_t last = 0;
  for (int second = 1; live.running.load() > 0; ++second) {
    tick.expires_at(start + std::chrono::seconds(second));
    co_await tick.async_wait(asio::use_awaitable);
    auto done = live.succeeded.load(std::memory_order_relaxed);
    per_second.push_back(done - last);
    std::fprintf(stderr, "%s: %3ds %10llu done %8llu/s  rejected %llu  errors %llu\n", name.c_str(), second,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(done - last),
                 static_cast<unsigned long long>(live.rejected.load(std::memory_order_relaxed)),
                 static_cast<unsigned long long>(live.errors.load(std::memory_order_relaxed)));
    last = done;
  }
}

double percentile_ms(const std::vector<std::uint32_t>& sorted_us, double q) {
  if (sorted_us.empty()) return 0;
  // Nearest rank: the smallest sample with at least q of all samples at or below it.
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted_us.size())));
  return sorted_us[std::clamp<std::size_t>(rank, 1, sorted_us.size()) - 1] / 1000.0;
}

// User + system CPU this process has used so far, in seconds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// The connections' results added up: every latency (sorted), the p99 of
// those sent in each second, the counts, and when the last one finished.
struct totals {
  std::vector<std::uint32_t> latencies;
  std::vector<double> p99_by_second;
  std::uint64_t succeeded = 0, rejected = 0, errors = 0;
  std::map<std::string, std::uint64_t> errors_by_kind;
  clock_type::time_point finished;
};

totals add_up(const std::vector<connection_result>& results, clock_type::time_point measured_from) {
  totals sum;
  std::vector<std::vector<std::uint32_t>> latencies_by_second;
  sum.finished = measured_from;
  for (const auto& r : results) {
    sum.latencies.insert(sum.latencies.end(), r.latencies_us.begin(), r.latencies_us.end());
    for (std::size_t i = 0; i < r.latencies_us.size(); ++i) {
      if (r.sent_second[i] >= latencies_by_second.size()) latencies_by_second.resize(r.sent_second[i] + 1);
      latencies_by_second[r.sent_second[i]].push_back(r.latencies_us[i]);
    }
    sum.succeeded += r.succeeded;
    sum.rejected += r.rejected;
    for (const auto& [kind, n] : r.errors) {
      sum.errors_by_kind[kind] += n;
      sum.errors += n;
    }
    sum.finished = std::max(sum.finished, r.finished);
  }
  std::sort(sum.latencies.begin(), sum.latencies.end());
  for (auto& second : latencies_by_second) {
    std::sort(second.begin(), second.end());
    sum.p99_by_second.push_back(percentile_ms(second, 0.99));
  }
  return sum;
}

void rethrow_failure(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

}  // namespace

std::string run_tag() {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

bool load_options_valid(const load_options& o) {
  return o.connections > 0 && o.threads > 0 && o.duration_s > 0 && o.warmup_s >= 0 && o.rate >= 0;
}

nlohmann::json run_load(const endpoint& target, const load_options& opt, const workload& work) {
  const double cpu_before = cpu_seconds();
  std::vector<std::unique_ptr<asio::io_context>> ios;
  for (std::size_t i = 0; i < opt.threads; ++i) ios.push_back(std::make_unique<asio::io_context>(1));
  std::vector<connection_result> results(opt.connections);
  std::vector<std::uint64_t> per_second;
  live_counters live;
  live.running = opt.connections;
  const auto start = clock_type::now() + 50ms;  // every connection starts on the same schedule
  const auto measured_from =
      start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(opt.warmup_s));
  const auto end =
      measured_from + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(opt.duration_s));
  if (opt.warmup_s > 0) std::fprintf(stderr, "%s: warming up for %.1f s\n", opt.name.c_str(), opt.warmup_s);

  for (std::size_t i = 0; i < opt.connections; ++i) {
    auto connection = [&, i]() -> asio::awaitable<void> {
      co_await run_connection(target, opt, work, i, start, measured_from, end, results[i], live);
    };
    asio::co_spawn(*ios[i % ios.size()], connection, [&](std::exception_ptr e) {
      --live.running;
      rethrow_failure(e);
    });
  }
  auto progress = [&]() -> asio::awaitable<void> {
    co_await report_progress(opt.name, measured_from, live, per_second);
  };
  asio::co_spawn(*ios[0], progress, rethrow_failure);
  std::vector<std::thread> extra;
  for (std::size_t i = 1; i < ios.size(); ++i) extra.emplace_back([&io = *ios[i]] { io.run(); });
  ios[0]->run();
  for (auto& t : extra) t.join();
  const double cpu_s = cpu_seconds() - cpu_before;

  const auto sum = add_up(results, measured_from);
  const double elapsed_s = std::chrono::duration<double>(sum.finished - measured_from).count();
  return {
      {"loop", opt.rate > 0 ? "open" : "closed"},
      {"connections", opt.connections},
      {"threads", opt.threads},
      {"per_request", opt.units_per_request},
      {"offered_rate", opt.rate},
      {"warmup_s", opt.warmup_s},
      {"duration_s", elapsed_s},
      {"cpu_s", cpu_s},
      {"completed", sum.succeeded},
      {"rejected", sum.rejected},
      {"errors", sum.errors},
      {"errors_by_kind", sum.errors_by_kind},
      {"throughput", elapsed_s > 0 ? static_cast<double>(sum.succeeded) / elapsed_s : 0.0},
      {"p50_ms", percentile_ms(sum.latencies, 0.50)},
      {"p90_ms", percentile_ms(sum.latencies, 0.90)},
      {"p99_ms", percentile_ms(sum.latencies, 0.99)},
      {"p999_ms", percentile_ms(sum.latencies, 0.999)},
      {"max_ms", sum.latencies.empty() ? 0.0 : sum.latencies.back() / 1000.0},
      {"per_second", per_second},
      {"p99_ms_by_second_sent", sum.p99_by_second},
  };
}

}  // namespace tally::bench
