#include "common/metrics/metrics.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <variant>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace tally::metrics {
namespace {

// `a="x",b="y"` → {a: x, b: y}. Our label sets are literals in the code:
// a malformed one is a bug, refused at start-up.
prometheus::Labels parse_labels(std::string_view text) {
  prometheus::Labels out;
  while (!text.empty()) {
    const auto eq = text.find("=\"");
    if (eq == std::string_view::npos) throw std::invalid_argument("bad label set: " + std::string(text));
    std::string key(text.substr(0, eq)), value;
    std::size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      value += text[i];
    }
    if (i == text.size()) throw std::invalid_argument("bad label set: " + std::string(text));
    out.emplace(std::move(key), std::move(value));
    text.remove_prefix(i + 1);
    if (!text.empty() && text.front() == ',') text.remove_prefix(1);
  }
  return out;
}

void check_bounds(const std::vector<double>& bounds) {
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) throw std::invalid_argument("histogram bounds must be finite");
    if (i > 0 && !(bounds[i - 1] < bounds[i]))
      throw std::invalid_argument("histogram bounds must be strictly increasing");
  }
}

}  // namespace

void counter::inc(std::uint64_t n) { c_->Increment(static_cast<double>(n)); }
std::uint64_t counter::value() const { return static_cast<std::uint64_t>(c_->Value()); }
void gauge::set(double v) { g_->Set(v); }
double gauge::value() const { return g_->Value(); }

histogram::histogram(std::vector<double> bounds) : bounds_((check_bounds(bounds), std::move(bounds))) {
  own_ = std::make_unique<prometheus::Histogram>(bounds_);
  h_ = own_.get();
}
histogram::histogram(prometheus::Histogram& h, std::vector<double> bounds) : bounds_(std::move(bounds)), h_(&h) {}
histogram::~histogram() = default;

void histogram::observe(double v) {
  // A NaN would make the sum NaN for the life of the process; it is a
  // caller's bug and says nothing about a latency.
  if (!std::isnan(v)) h_->Observe(v);
}

std::vector<std::uint64_t> histogram::bucket_counts() const {
  const auto m = h_->Collect().histogram;
  std::vector<std::uint64_t> out;
  std::uint64_t below = 0;
  for (const auto& b : m.bucket) {
    out.push_back(b.cumulative_count - below);
    below = b.cumulative_count;
  }
  return out;
}
std::uint64_t histogram::count() const { return h_->Collect().histogram.sample_count; }
double histogram::sum() const { return h_->Collect().histogram.sample_sum; }

struct registry::state {
  std::shared_ptr<prometheus::Registry> r = std::make_shared<prometheus::Registry>();
  std::mutex mutex;  // registration only, never an update
  std::map<std::string, std::variant<prometheus::Family<prometheus::Counter>*, prometheus::Family<prometheus::Gauge>*,
                                     prometheus::Family<prometheus::Histogram>*>>
      families;
  std::map<std::string, std::variant<std::unique_ptr<counter>, std::unique_ptr<gauge>, std::unique_ptr<histogram>>>
      series;  // by name + labels

  template <class P, class Builder>
  prometheus::Family<P>& family(const std::string& name, const std::string& help, Builder build) {
    // prometheus-cpp writes HELP as given: a line break would end it early.
    if (help.find_first_of("\n\\") != std::string::npos)
      throw std::invalid_argument("metric '" + name + "': help must be one line without backslashes");
    auto it = families.find(name);
    if (it == families.end()) it = families.emplace(name, &build().Name(name).Help(help).Register(*r)).first;
    auto* f = std::get_if<prometheus::Family<P>*>(&it->second);
    if (!f) throw std::invalid_argument("metric '" + name + "' is already registered as another kind");
    return **f;
  }

  template <class M, class Make>
  M& add(const std::string& name, const std::string& labels, Make make) {
    const std::lock_guard lock(mutex);
    auto key = name + "{" + labels + "}";
    auto it = series.find(key);
    if (it == series.end()) it = series.emplace(key, make()).first;
    return *std::get<std::unique_ptr<M>>(it->second);
  }
};

registry::registry() : s_(std::make_unique<state>()) {}
registry::~registry() = default;

counter& registry::add_counter(const std::string& name, const std::string& help, const std::string& labels) {
  return s_->add<counter>(name, labels, [&] {
    auto& f = s_->family<prometheus::Counter>(name, help, prometheus::BuildCounter);
    return std::make_unique<counter>(f.Add(parse_labels(labels)));
  });
}

gauge& registry::add_gauge(const std::string& name, const std::string& help, const std::string& labels) {
  return s_->add<gauge>(name, labels, [&] {
    auto& f = s_->family<prometheus::Gauge>(name, help, prometheus::BuildGauge);
    return std::make_unique<gauge>(f.Add(parse_labels(labels)));
  });
}

histogram& registry::add_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                   const std::string& labels) {
  check_bounds(bounds);
  return s_->add<histogram>(name, labels, [&] {
    auto& f = s_->family<prometheus::Histogram>(name, help, prometheus::BuildHistogram);
    return std::make_unique<histogram>(f.Add(parse_labels(labels), bounds), bounds);
  });
}

std::string registry::render() const { return prometheus::TextSerializer().Serialize(s_->r->Collect()); }

// Fine enough around the targets' bounds (20, 100, 150 ms) that a p99 read
// from the buckets says on which side of them it lies.
std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.035, 0.05,
          0.075,  0.1,   0.15,   0.2,   0.25,   0.5,  1,     2.5,  5,     10};
}

}  // namespace tally::metrics
