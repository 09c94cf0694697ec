#pragma once
// A request target split into path segments and query, and its query
// parameters (no I/O, no Beast: the gateway's request checks and their fuzz
// target use it alone).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tally::http {

struct target {
  std::vector<std::string_view> path;  // segments, without empty ones
  std::string_view query;
};
target split_target(std::string_view t);
std::optional<std::string_view> query_param(std::string_view query, std::string_view name);
std::optional<std::int64_t> to_int(std::string_view s);

}  // namespace tally::http
