#include "common/http/route_match.hpp"

namespace tally::http {

std::optional<std::vector<std::string>> match_path(std::string_view pattern, const std::vector<std::string>& path) {
  std::vector<std::string> args;
  std::size_t at = 0;  // the path segment to match next
  while (!pattern.empty()) {
    if (pattern.front() == '/') pattern.remove_prefix(1);
    const auto end = pattern.find('/');
    const auto part = pattern.substr(0, end);
    pattern = end == std::string_view::npos ? std::string_view{} : pattern.substr(end);
    if (part.empty()) continue;
    if (at == path.size()) return std::nullopt;
    const bool param = part.front() == '{' && part.back() == '}';
    if (param && part.ends_with("...}")) {
      std::string rest = path[at];
      while (++at < path.size()) rest.append(1, '/').append(path[at]);
      args.push_back(std::move(rest));
      continue;
    }
    if (param)
      args.push_back(path[at]);
    else if (path[at] != part)
      return std::nullopt;
    ++at;
  }
  if (at != path.size()) return std::nullopt;
  return args;
}

}  // namespace tally::http
