#include "common/metrics/metrics.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <variant>

namespace tally::metrics {
namespace {

// Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Checked at registration
// so a typo fails at start-up instead of producing an unscrapable page.
bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  const auto ok = [](char c, bool first) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    return alpha || (!first && c >= '0' && c <= '9');
  };
  if (!ok(name.front(), true)) return false;
  return std::all_of(name.begin() + 1, name.end(), [&](char c) { return ok(c, false); });
}

std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::array<char, 32> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::general);
  return std::string(buf.data(), res.ptr);
}

// HELP text escapes backslash and newline (exposition format 0.0.4).
std::string escape_help(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string braces(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }

// RAII over the registry's atomic_flag; held only while entries_ changes or
// is read, never on the update path.
class spin_guard {
 public:
  explicit spin_guard(std::atomic_flag& f) : flag_(f) {
    while (flag_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~spin_guard() { flag_.clear(std::memory_order_release); }
  spin_guard(const spin_guard&) = delete;
  spin_guard& operator=(const spin_guard&) = delete;

 private:
  std::atomic_flag& flag_;
};

}  // namespace

struct registry::entry {
  std::string name;
  std::string help;
  std::string labels;
  std::variant<std::unique_ptr<counter>, std::unique_ptr<gauge>, std::unique_ptr<histogram>> metric;

  std::string_view type() const {
    static constexpr std::array<std::string_view, 3> names = {"counter", "gauge", "histogram"};
    return names[metric.index()];
  }
};

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i])) throw std::invalid_argument("histogram bounds must be finite");
    if (i > 0 && !(bounds_[i - 1] < bounds_[i]))
      throw std::invalid_argument("histogram bounds must be strictly increasing");
  }
  // One slot per bound plus the +Inf bucket; make_unique value-initialises to 0.
  buckets_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
}

void histogram::observe(double v) {
  // A NaN would make sum NaN for the life of the process; it is a caller bug
  // and carries no information for a latency histogram.
  if (std::isnan(v)) return;
  // `le` is inclusive: v lands in the first bucket whose bound is >= v.
  const auto idx = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[idx].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::uint64_t> histogram::bucket_counts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

registry::registry() = default;
registry::~registry() = default;

template <typename M, typename Make>
M& registry::add(const std::string& name, const std::string& help, const std::string& labels, Make make) {
  if (!valid_name(name)) throw std::invalid_argument("metric name '" + name + "' is not a valid Prometheus name");
  const spin_guard guard(lock_);
  for (const auto& e : entries_) {
    if (e->name != name) continue;
    // All series of a name share one TYPE line, so they must share a kind.
    auto* same_kind = std::get_if<std::unique_ptr<M>>(&e->metric);
    if (!same_kind) throw std::invalid_argument("metric '" + name + "' is already registered as " + std::string(e->type()));
    if (e->labels == labels) return **same_kind;
  }
  auto metric = make();
  M& ref = *metric;
  entries_.push_back(std::make_unique<entry>(entry{name, help, labels, std::move(metric)}));
  return ref;
}

counter& registry::add_counter(const std::string& name, const std::string& help, const std::string& labels) {
  return add<counter>(name, help, labels, [] { return std::make_unique<counter>(); });
}

gauge& registry::add_gauge(const std::string& name, const std::string& help, const std::string& labels) {
  return add<gauge>(name, help, labels, [] { return std::make_unique<gauge>(); });
}

histogram& registry::add_histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                   const std::string& labels) {
  return add<histogram>(name, help, labels, [&] { return std::make_unique<histogram>(std::move(bounds)); });
}

std::string registry::render() const {
  const spin_guard guard(lock_);
  std::string out;
  std::vector<bool> done(entries_.size(), false);
  // Series of one name are written together, in the order the name first
  // appeared, with HELP/TYPE once: Prometheus rejects a repeated TYPE line.
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (done[i]) continue;
    const entry& first = *entries_[i];
    out += "# HELP " + first.name + " " + escape_help(first.help) + "\n";
    out += "# TYPE " + first.name + " " + std::string(first.type()) + "\n";
    for (std::size_t j = i; j < entries_.size(); ++j) {
      const entry& e = *entries_[j];
      if (done[j] || e.name != first.name) continue;
      done[j] = true;
      if (const auto* c = std::get_if<std::unique_ptr<counter>>(&e.metric)) {
        out += e.name + braces(e.labels) + " " + std::to_string((*c)->value()) + "\n";
      } else if (const auto* g = std::get_if<std::unique_ptr<gauge>>(&e.metric)) {
        out += e.name + braces(e.labels) + " " + format_double((*g)->value()) + "\n";
      } else {
        const histogram& h = *std::get<std::unique_ptr<histogram>>(e.metric);
        const auto counts = h.bucket_counts();
        const std::string sep = e.labels.empty() ? "" : e.labels + ",";
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < counts.size(); ++b) {
          cumulative += counts[b];
          const std::string le = b < h.bounds().size() ? format_double(h.bounds()[b]) : "+Inf";
          out += e.name + "_bucket{" + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
        }
        out += e.name + "_sum" + braces(e.labels) + " " + format_double(h.sum()) + "\n";
        // The total of the buckets just read, not count(): under concurrent
        // observe() the two can differ for an instant, and Prometheus expects
        // _count to equal the +Inf bucket.
        out += e.name + "_count" + braces(e.labels) + " " + std::to_string(cumulative) + "\n";
      }
    }
  }
  return out;
}

// Fine enough around the targets' bounds (20, 100, 150 ms) that a p99 read
// from the buckets says on which side of them it lies.
std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.035, 0.05, 0.075,
          0.1,    0.15,  0.2,    0.25,  0.5,    1,    2.5,   5,    10};
}

}  // namespace tally::metrics
