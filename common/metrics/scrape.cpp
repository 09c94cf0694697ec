#include "common/metrics/scrape.hpp"

#include <algorithm>
#include <charconv>
#include <functional>

namespace tally::metrics {

namespace {

// Calls `each` with the value of every sample of `name`.
void samples(std::string_view text, std::string_view name, const std::function<void(double)>& each) {
  while (!text.empty()) {
    const auto end = std::min(text.find('\n'), text.size());
    auto line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (!line.starts_with(name) || line.size() == name.size()) continue;
    line.remove_prefix(name.size());
    if (line.front() == '{') {
      const auto close = line.find('}');
      if (close == std::string_view::npos) continue;
      line.remove_prefix(close + 1);
    }
    if (line.empty() || line.front() != ' ') continue;  // another metric whose name starts with `name`
    line.remove_prefix(line.find_first_not_of(' '));
    line = line.substr(0, line.find(' '));  // a timestamp may follow
    double v = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec == std::errc() && ptr == line.data() + line.size()) each(v);
  }
}

}  // namespace

std::optional<double> sample_sum(std::string_view text, std::string_view name) {
  std::optional<double> out;
  samples(text, name, [&](double v) { out = out.value_or(0) + v; });
  return out;
}

std::optional<double> sample_max(std::string_view text, std::string_view name) {
  std::optional<double> out;
  samples(text, name, [&](double v) { out = std::max(out.value_or(v), v); });
  return out;
}

}  // namespace tally::metrics
