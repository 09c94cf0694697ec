#pragma once
// Prometheus metrics on prometheus-cpp's core (Debian prometheus-cpp-dev),
// served by our own HTTP server: render() is the text exposition format.
// Metrics are created once (at start-up, under a mutex) and updated
// without a lock of ours: counters and gauges are atomics; a histogram
// observation takes prometheus-cpp's own uncontended lock.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace tally::metrics {

class counter {
 public:
  explicit counter(prometheus::Counter& c) : c_(&c) {}
  void inc(std::uint64_t n = 1);
  std::uint64_t value() const;

 private:
  prometheus::Counter* c_;
};

class gauge {
 public:
  explicit gauge(prometheus::Gauge& g) : g_(&g) {}
  void set(double v);
  double value() const;

 private:
  prometheus::Gauge* g_;
};

// Cumulative buckets with fixed upper bounds (seconds, or any unit), `le`
// inclusive. Bounds must be finite and strictly increasing.
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);  // on its own (tests)
  histogram(prometheus::Histogram& h, std::vector<double> bounds);
  ~histogram();
  histogram(const histogram&) = delete;
  histogram& operator=(const histogram&) = delete;
  void observe(double v);  // a NaN is ignored
  const std::vector<double>& bounds() const { return bounds_; }
  std::vector<std::uint64_t> bucket_counts() const;  // per bound, not cumulative; last = +Inf
  std::uint64_t count() const;
  double sum() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<prometheus::Histogram> own_;  // when not in a registry
  prometheus::Histogram* h_;
};

class registry {
 public:
  registry();
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // `labels` is the literal label set, e.g. R"(mode="group")" or "".
  // The same name+labels returns the same metric; a name is one kind.
  counter& add_counter(const std::string& name, const std::string& help, const std::string& labels = "");
  gauge& add_gauge(const std::string& name, const std::string& help, const std::string& labels = "");
  histogram& add_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                           const std::string& labels = "");
  std::string render() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

// Latency buckets in seconds, 0.5 ms .. 10 s.
std::vector<double> latency_bounds();

}  // namespace tally::metrics
