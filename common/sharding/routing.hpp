#pragma once
// Which shard owns an account: accounts hash to a fixed number of buckets,
// buckets are assigned to shards in configuration, so a shard can later be
// split by moving buckets without rehashing every account.
//
// The configuration is one line (fits a file value and an environment
// variable alike): `name=host:port@ranges;...`, e.g.
//   s0=127.0.0.1:7101@0-511;s1=127.0.0.1:7102@512-1023
// Ranges are `a-b` or `a`, comma-separated. Leave every `@ranges` out to
// split the buckets evenly in the order given. Lists of other services
// (gateways for the relay) use the same `name=host:port;...` form.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tally::sharding {

struct shard_endpoint {
  std::string name;
  std::string host;  // an IPv4 address
  std::uint16_t port = 0;
};

// The bucket of an account: the first 8 bytes of SHA-256(tenant 0x1f
// account), big-endian, modulo `buckets`. Never change it: it would move
// accounts between shards.
std::size_t bucket_of(std::string_view tenant, std::string_view account, std::size_t buckets);

// `name=host:port;...` with unique names and IPv4 hosts; an error message otherwise.
std::variant<std::vector<shard_endpoint>, std::string> parse_endpoints(std::string_view spec);

class routing_table {
 public:
  static std::variant<routing_table, std::string> parse(std::string_view spec, std::size_t buckets);

  std::size_t shard_of(std::string_view tenant, std::string_view account) const;
  const std::vector<shard_endpoint>& shards() const { return shards_; }
  std::size_t buckets() const { return owner_.size(); }
  // The buckets a shard owns, for operators.
  std::size_t buckets_of(std::size_t shard) const;

 private:
  std::vector<shard_endpoint> shards_;
  std::vector<std::uint16_t> owner_;  // bucket -> index into shards_
};

}  // namespace tally::sharding
