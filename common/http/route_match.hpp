#pragma once
// A route's path as data: "/v1/accounts/{id}/entries" matched against a
// request's decoded path segments. `{name}` takes one segment; a last
// `{name...}` takes the rest (one or more segments, joined by '/'). Pure,
// so a service's route table reads in one screen and can be listed (the
// gateway's OpenAPI test compares the two).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::http {

// The values of the pattern's parameters, in order; nullopt when the path
// does not match.
std::optional<std::vector<std::string>> match_path(std::string_view pattern, const std::vector<std::string>& path);

}  // namespace tally::http
