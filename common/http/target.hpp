#pragma once
// A request target split into path segments and query, and its query
// parameters (no I/O, no Beast: the gateway's request checks and their fuzz
// target use it alone). Segments and parameter values are percent-decoded
// (Boost.URL), so a client that encodes an id's ':' as %3A names the same
// id; an escape that is not one (a '%' without two hex digits) is kept as
// sent, for the caller's checks to refuse.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::http {

struct target {
  std::vector<std::string> path;  // segments, decoded, without empty ones
  std::string_view query;         // as sent: query_param decodes
};
target split_target(std::string_view t);
// The first value of `name`, decoded, with '+' as a space (as HTML forms
// and most HTTP clients send it); empty when the parameter has no '='.
std::optional<std::string> query_param(std::string_view query, std::string_view name);
std::optional<std::int64_t> to_int(std::string_view s);
// A decoded segment as it goes back into a path (split_target's inverse).
std::string encoded_segment(std::string_view decoded);

}  // namespace tally::http
