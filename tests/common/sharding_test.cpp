// Accounts -> buckets -> shards.
#include "common/sharding/routing.hpp"

#include <gtest/gtest.h>

namespace tally::sharding {
namespace {

routing_table table(std::string_view spec, std::size_t buckets) {
  auto r = routing_table::parse(spec, buckets);
  if (auto* e = std::get_if<std::string>(&r)) ADD_FAILURE() << *e;
  return std::get<routing_table>(r);
}

std::string refused(std::string_view spec, std::size_t buckets = 8) {
  auto r = routing_table::parse(spec, buckets);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "accepted";
}

TEST(Bucket, IsPinned) {
  // Computed independently (Python hashlib). A change here moves accounts
  // between shards: never let this test be "updated".
  EXPECT_EQ(bucket_of("t1", "alice", 1024), 942u);
  EXPECT_EQ(bucket_of("t1", "bob", 1024), 342u);
  EXPECT_EQ(bucket_of("acme", "student-7", 16), 13u);
  // The tenant is part of the key, and the separator keeps fields apart.
  EXPECT_NE(bucket_of("t1", "alice", 1u << 16), bucket_of("t2", "alice", 1u << 16));
  EXPECT_NE(bucket_of("a", "bc", 1u << 16), bucket_of("ab", "c", 1u << 16));
}

TEST(Routing, ExplicitRanges) {
  auto t = table("s0=127.0.0.1:7101@0-511;s1=127.0.0.1:7102@512-1023", 1024);
  ASSERT_EQ(t.shards().size(), 2u);
  EXPECT_EQ(t.shards()[1].name, "s1");
  EXPECT_EQ(t.shards()[1].port, 7102);
  EXPECT_EQ(t.shard_of("t1", "alice"), 1u);  // bucket 942
  EXPECT_EQ(t.shard_of("t1", "bob"), 0u);    // bucket 342
  EXPECT_EQ(t.buckets_of(0), 512u);
  auto odd = table("a=127.0.0.1:1@0,2,4-5;b=127.0.0.1:2@1,3,6-7", 8);
  EXPECT_EQ(odd.buckets_of(0), 4u);
  EXPECT_EQ(odd.buckets_of(1), 4u);
}

TEST(Routing, EvenSplitWithoutRanges) {
  auto t = table("s0=127.0.0.1:7101;s1=127.0.0.1:7102;s2=127.0.0.1:7103", 10);
  EXPECT_EQ(t.buckets_of(0), 3u);
  EXPECT_EQ(t.buckets_of(1), 3u);
  EXPECT_EQ(t.buckets_of(2), 4u);
  EXPECT_EQ(table("only=127.0.0.1:7101", 1024).shard_of("t1", "anyone"), 0u);
}

TEST(Routing, RefusesABadSpecWithAReason) {
  EXPECT_EQ(refused(""), "routing.shards is empty: name=host:port[@ranges];...");
  EXPECT_EQ(refused("s0=127.0.0.1:1", 0), "routing.buckets must be between 1 and 65536");
  EXPECT_EQ(refused("=127.0.0.1:1"), "shard entry without a name: =127.0.0.1:1");
  EXPECT_EQ(refused("s0=127.0.0.1"), "shard s0: expected host:port, got 127.0.0.1");
  EXPECT_EQ(refused("s0=127.0.0.1:0"), "shard s0: expected host:port, got 127.0.0.1:0");
  EXPECT_EQ(refused("s0=localhost:7101"), "shard s0: host must be an IPv4 address, got localhost");
  EXPECT_EQ(refused("s0=127.0.0.1:1;s0=127.0.0.1:2"), "shard s0 is named twice");
  EXPECT_EQ(refused("a=127.0.0.1:1@0-3;b=127.0.0.1:2"), "give bucket ranges for every shard or for none");
  EXPECT_EQ(refused("a=127.0.0.1:1@0-4;b=127.0.0.1:2@4-7"), "bucket 4 is assigned twice");
  EXPECT_EQ(refused("a=127.0.0.1:1@0-3;b=127.0.0.1:2@5-7"), "bucket 4 has no shard");
  EXPECT_EQ(refused("a=127.0.0.1:1@0-8"), "shard a: bad bucket range 0-8");
  EXPECT_EQ(refused("a=127.0.0.1:1@3-1"), "shard a: bad bucket range 3-1");
  EXPECT_EQ(refused("a=127.0.0.1:1;b=127.0.0.1:2", 1), "more shards than buckets");
}

TEST(Endpoints, ParseNamedAddresses) {
  auto r = parse_endpoints("g0=127.0.0.1:8080;g1=127.0.0.2:8081");
  ASSERT_TRUE(std::holds_alternative<std::vector<shard_endpoint>>(r));
  const auto& list = std::get<std::vector<shard_endpoint>>(r);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].name, "g1");
  EXPECT_EQ(list[1].host, "127.0.0.2");
  EXPECT_EQ(list[1].port, 8081);
  auto refused_list = [](std::string_view spec) {
    auto e = parse_endpoints(spec);
    return std::holds_alternative<std::string>(e) ? std::get<std::string>(e) : "accepted";
  };
  EXPECT_EQ(refused_list(""), "the list is empty: name=host:port;...");
  EXPECT_EQ(refused_list("g0=127.0.0.1:1;g0=127.0.0.1:2"), "g0 is named twice");
  EXPECT_EQ(refused_list("g0=host:1"), "g0: host must be an IPv4 address, got host");
}

}  // namespace
}  // namespace tally::sharding
