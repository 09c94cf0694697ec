#include "common/http/target.hpp"

#include <charconv>

#include <boost/url/encode.hpp>
#include <boost/url/encoding_opts.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/pchars.hpp>

namespace tally::http {

namespace {

std::string decoded(std::string_view s, bool space_as_plus) {
  auto pct = boost::urls::make_pct_string_view(s);
  if (!pct) return std::string(s);
  boost::urls::encoding_opts opts;
  opts.space_as_plus = space_as_plus;
  return pct->decode(opts);
}

}  // namespace

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
    out.path.push_back(decoded(t.substr(0, slash), false));
    t = slash == std::string_view::npos ? std::string_view{} : t.substr(slash);
  }
  return out;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return eq == std::string_view::npos ? std::string{} : decoded(pair.substr(eq + 1), true);
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

std::string encoded_segment(std::string_view decoded) { return boost::urls::encode(decoded, boost::urls::pchars); }

}  // namespace tally::http
