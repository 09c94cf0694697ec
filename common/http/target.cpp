#include "common/http/target.hpp"

#include <charconv>

namespace tally::http {

target split_target(std::string_view t) {
  target out;
  auto q = t.find('?');
  if (q != std::string_view::npos) {
    out.query = t.substr(q + 1);
    t = t.substr(0, q);
  }
  while (!t.empty()) {
    if (t.front() == '/') {
      t.remove_prefix(1);
      continue;
    }
    auto slash = t.find('/');
    out.path.push_back(t.substr(0, slash));
    t = slash == std::string_view::npos ? std::string_view{} : t.substr(slash);
  }
  return out;
}

std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
  }
  return std::nullopt;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace tally::http
