#pragma once
// A Prometheus metrics registry. Metrics are created once (at start-up) and
// updated lock-free; render() writes the text exposition format 0.0.4.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tally::metrics {

class counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }
 private:
  std::atomic<std::uint64_t> value_{0};
};

class gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }
 private:
  std::atomic<double> value_{0};
};

// Cumulative buckets with fixed upper bounds (seconds, or any unit).
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  std::vector<std::uint64_t> bucket_counts() const;  // per bound, not cumulative; last = +Inf
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

class registry {
 public:
  // Out of line because `entry` is only complete in metrics.cpp.
  registry();
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // `labels` is the literal label set, e.g. R"(mode="group")" or "".
  // The same name+labels returns the same metric.
  counter& add_counter(const std::string& name, const std::string& help, const std::string& labels = "");
  gauge& add_gauge(const std::string& name, const std::string& help, const std::string& labels = "");
  histogram& add_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                           const std::string& labels = "");
  std::string render() const;
 private:
  struct entry;
  template <typename M, typename Make>
  M& add(const std::string& name, const std::string& help, const std::string& labels, Make make);

  std::vector<std::unique_ptr<entry>> entries_;
  mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
};

// Latency buckets in seconds, 0.5 ms .. 10 s.
std::vector<double> latency_bounds();

}  // namespace tally::metrics
