#pragma once
// Reading another process's /metrics (Prometheus text exposition): the
// gateway's health page sums a few counters of every service. Pure.
#include <optional>
#include <string_view>

namespace tally::metrics {

// Every sample of the metric `name` (whatever its labels), summed, or the
// largest; nullopt when the text has none.
std::optional<double> sample_sum(std::string_view text, std::string_view name);
std::optional<double> sample_max(std::string_view text, std::string_view name);

}  // namespace tally::metrics
