#include "common/sharding/routing.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "common/digest/digest.hpp"

namespace tally::sharding {

namespace {

constexpr std::size_t max_buckets = 65536;
constexpr std::uint16_t unowned = std::numeric_limits<std::uint16_t>::max();

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::optional<std::size_t> number(std::string_view s) {
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::variant<shard_endpoint, std::string> parse_endpoint(std::string_view entry) {
  auto eq = entry.find('=');
  if (eq == std::string_view::npos || eq == 0) return "entry without a name: " + std::string(entry);
  shard_endpoint e;
  e.name = std::string(entry.substr(0, eq));
  auto address = entry.substr(eq + 1);
  auto colon = address.rfind(':');
  auto port = colon == std::string_view::npos ? std::nullopt : number(address.substr(colon + 1));
  if (!port || *port == 0 || *port > 65535) return e.name + ": expected host:port, got " + std::string(address);
  e.host = std::string(address.substr(0, colon));
  in_addr parsed{};
  if (inet_pton(AF_INET, e.host.c_str(), &parsed) != 1) return e.name + ": host must be an IPv4 address, got " + e.host;
  e.port = static_cast<std::uint16_t>(*port);
  return e;
}

}  // namespace

std::variant<std::vector<shard_endpoint>, std::string> parse_endpoints(std::string_view spec) {
  if (spec.empty()) return std::string("the list is empty: name=host:port;...");
  std::vector<shard_endpoint> out;
  for (auto entry : split(spec, ';')) {
    auto e = parse_endpoint(entry);
    if (auto* bad = std::get_if<std::string>(&e)) return std::move(*bad);
    for (const auto& other : out)
      if (other.name == std::get<shard_endpoint>(e).name) return other.name + " is named twice";
    out.push_back(std::move(std::get<shard_endpoint>(e)));
  }
  return out;
}

std::size_t bucket_of(std::string_view tenant, std::string_view account, std::size_t buckets) {
  std::string key;
  key.reserve(tenant.size() + account.size() + 1);
  key.append(tenant).append(1, '\x1f').append(account);
  const auto hex = digest::sha256_hex(key);
  std::uint64_t v = 0;
  std::from_chars(hex.data(), hex.data() + 16, v, 16);
  return static_cast<std::size_t>(v % buckets);
}

std::variant<routing_table, std::string> routing_table::parse(std::string_view spec, std::size_t buckets) {
  if (buckets == 0 || buckets > max_buckets) return "routing.buckets must be between 1 and 65536";
  if (spec.empty()) return "routing.shards is empty: name=host:port[@ranges];...";
  routing_table t;
  t.owner_.assign(buckets, unowned);
  std::vector<std::vector<std::string_view>> ranges;
  for (auto entry : split(spec, ';')) {
    auto at = entry.find('@');
    auto e = parse_endpoint(entry.substr(0, at));
    if (auto* bad = std::get_if<std::string>(&e)) return "shard " + *bad;
    auto& endpoint = std::get<shard_endpoint>(e);
    for (const auto& other : t.shards_)
      if (other.name == endpoint.name) return "shard " + endpoint.name + " is named twice";
    t.shards_.push_back(std::move(endpoint));
    ranges.push_back(at == std::string_view::npos ? std::vector<std::string_view>{} : split(entry.substr(at + 1), ','));
  }
  if (t.shards_.size() > buckets) return "more shards than buckets";
  const bool even = std::all_of(ranges.begin(), ranges.end(), [](const auto& r) { return r.empty(); });
  const bool explicit_all = std::none_of(ranges.begin(), ranges.end(), [](const auto& r) { return r.empty(); });
  if (!even && !explicit_all) return "give bucket ranges for every shard or for none";
  for (std::size_t s = 0; s < t.shards_.size(); ++s) {
    if (even) {
      auto first = s * buckets / t.shards_.size(), last = (s + 1) * buckets / t.shards_.size();
      for (auto b = first; b < last; ++b) t.owner_[b] = static_cast<std::uint16_t>(s);
      continue;
    }
    for (auto r : ranges[s]) {
      auto dash = r.find('-');
      auto lo = number(r.substr(0, dash));
      auto hi = dash == std::string_view::npos ? lo : number(r.substr(dash + 1));
      if (!lo || !hi || *lo > *hi || *hi >= buckets)
        return "shard " + t.shards_[s].name + ": bad bucket range " + std::string(r);
      for (auto b = *lo; b <= *hi; ++b) {
        if (t.owner_[b] != unowned) return "bucket " + std::to_string(b) + " is assigned twice";
        t.owner_[b] = static_cast<std::uint16_t>(s);
      }
    }
  }
  for (std::size_t b = 0; b < buckets; ++b)
    if (t.owner_[b] == unowned) return "bucket " + std::to_string(b) + " has no shard";
  return t;
}

std::size_t routing_table::shard_of(std::string_view tenant, std::string_view account) const {
  return owner_[bucket_of(tenant, account, owner_.size())];
}

std::size_t routing_table::buckets_of(std::size_t shard) const {
  return static_cast<std::size_t>(std::count(owner_.begin(), owner_.end(), shard));
}

}  // namespace tally::sharding
