// How a conninfo is split host by host for a replicated cluster.
#include "common/pg/conninfo.hpp"

#include <gtest/gtest.h>

namespace tally::pg {
namespace {

using namespace std::chrono_literals;

std::string host_and_port(const connect_params& p) {
  return p.value("host").value_or("-") + ":" + p.value("port").value_or("-");
}

TEST(Conninfo, AMultiHostUriGivesOneSetPerHostInOrderKeepingTheRest) {
  auto p = session_params(
      "postgresql://postgres@127.0.0.1:5001,127.0.0.2:5002,127.0.0.3:5003/tally_0"
      "?target_session_attrs=read-write&connect_timeout=2");
  ASSERT_TRUE(p);
  const auto hosts = per_host(*p);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(host_and_port(hosts[0]), "127.0.0.1:5001");
  EXPECT_EQ(host_and_port(hosts[1]), "127.0.0.2:5002");
  EXPECT_EQ(host_and_port(hosts[2]), "127.0.0.3:5003");
  for (const auto& h : hosts) {
    EXPECT_EQ(h.value("dbname"), "tally_0");
    EXPECT_EQ(h.value("user"), "postgres");
    EXPECT_EQ(h.value("target_session_attrs"), "read-write");
    EXPECT_EQ(h.value("options"), "-c jit=off");
  }
  EXPECT_EQ(connect_timeout(*p), 2000ms);
}

TEST(Conninfo, OnePortServesEveryHost) {
  auto p = session_params("host=a,b port=6000 dbname=x options='-c work_mem=8MB'");
  ASSERT_TRUE(p);
  const auto hosts = per_host(*p);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(host_and_port(hosts[0]), "a:6000");
  EXPECT_EQ(host_and_port(hosts[1]), "b:6000");
  EXPECT_EQ(hosts[1].value("options"), "-c work_mem=8MB -c jit=off");
}

TEST(Conninfo, OneHostIsLeftAsItIs) {
  auto p = session_params("host=127.0.0.1 port=5432 dbname=x connect_timeout=0");
  ASSERT_TRUE(p);
  const auto hosts = per_host(*p);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].keywords, p->keywords);
  EXPECT_EQ(hosts[0].values, p->values);
  EXPECT_FALSE(connect_timeout(*p));  // 0 is "wait for ever" in libpq: the caller's own time applies
}

TEST(Conninfo, WhatDoesNotParseIsNullopt) { EXPECT_FALSE(session_params("host='unterminated")); }

}  // namespace
}  // namespace tally::pg
