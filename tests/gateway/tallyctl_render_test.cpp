// tallyctl's text output and its --url parsing, without a server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gateway/tallyctl/api_client.hpp"
#include "gateway/tallyctl/render.hpp"

namespace tally::ctl {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TallyctlRender, TablesPadEveryColumnToItsWidestCell) {
  EXPECT_EQ(table({{"A", "BB"}, {"ccc", "d"}}), "A    BB\nccc  d\n");
  EXPECT_EQ(table({}), "");
}

TEST(TallyctlRender, ASagaListSaysWhereTheNextPageStarts) {
  const json page = {{"sagas",
                      {{{"saga_id", "sg_1"},
                        {"type", "transfer"},
                        {"state", "failed"},
                        {"biz_id", "t-1"},
                        {"created_at", "2026-12-03T10:00:00.000Z"},
                        {"error", {{"code", "insufficient_funds"}, {"message", "no"}}}}}},
                     {"next", "sg_1"}};
  const auto text = sagas_list(page);
  EXPECT_THAT(text, HasSubstr("sg_1  transfer  failed"));
  EXPECT_THAT(text, HasSubstr("insufficient_funds: no"));
  EXPECT_THAT(text, HasSubstr("next page: sg_1"));
  EXPECT_THAT(sagas_list({{"sagas", json::array()}, {"next", nullptr}}), Not(HasSubstr("next page")));
}

TEST(TallyctlRender, ATimelineListsEveryAttemptInTheOrderSent) {
  const json saga = {
      {"saga_id", "sg_2"},
      {"type", "transfer"},
      {"biz_id", "t-2"},
      {"state", "compensated"},
      {"input", {{"amount", 5}}},
      {"error", {{"code", "deadline_exceeded"}, {"message", "late"}}},
      {"steps", {{{"name", "hold_source"}, {"state", "compensated"}, {"attempts", 2}, {"error", nullptr}}}},
      {"history",
       {{{"sent_at", "T1"},
         {"step", "hold_source"},
         {"item", 0},
         {"compensation", false},
         {"attempt", 1},
         {"shard", "s0"},
         {"outcome", "succeeded"},
         {"code", nullptr},
         {"answered_at", "T2"}},
        {{"sent_at", "T3"},
         {"step", "hold_source"},
         {"item", 0},
         {"compensation", true},
         {"attempt", 1},
         {"shard", "s0"},
         {"outcome", nullptr},
         {"code", nullptr},
         {"answered_at", nullptr}}}}};
  const auto text = saga_timeline(saga);
  EXPECT_THAT(text, HasSubstr("transfer saga sg_2 (biz_id t-2)"));
  EXPECT_THAT(text, HasSubstr("deadline_exceeded: late"));
  const auto forward = text.find("T1    hold_source  0     forward");
  const auto undo = text.find("T3    hold_source  0     undo");
  ASSERT_NE(forward, std::string::npos) << text;
  ASSERT_NE(undo, std::string::npos) << text;
  EXPECT_LT(forward, undo);
  EXPECT_THAT(saga_timeline({{"saga_id", "sg_3"}, {"steps", json::array()}}), Not(HasSubstr("timeline")));
}

TEST(TallyctlRender, AccountsEntriesLotsAndReports) {
  EXPECT_THAT(account({{"account_id", "alice"}, {"balance", 70}, {"next_expiry", nullptr}}),
              HasSubstr("balance      70"));
  EXPECT_THAT(
      entries({{"entries", {{{"seq", 3}, {"biz_type", "credit"}, {"biz_id", "c"}, {"delta", 5}}}}, {"next", 3}}),
      HasSubstr("next page: 3"));
  EXPECT_THAT(lots({{"lots", {{{"lot_id", 1}, {"state", "open"}, {"expires_at", nullptr}}}}, {"next", nullptr}}),
              HasSubstr("1    open"));
  EXPECT_THAT(
      reconciliation_reports(
          {{"reports", {{{"report_id", 9}, {"shard", 0}, {"classes", {{"duplicate", 1}}}, {"frozen", {"bob"}}}}}}),
      HasSubstr("{\"duplicate\":1}"));
  const auto run = reconciliation_run({{"watermark", 12},
                                       {"accounts", 3},
                                       {"differences", 1},
                                       {"accounts_with_differences", {{{"account_id", "bob"}, {"difference", 2}}}},
                                       {"frozen", {{{"account_id", "bob"}}}}});
  EXPECT_THAT(run, HasSubstr("full, watermark 12: 3 accounts, 1 with differences"));
  EXPECT_THAT(run, HasSubstr("frozen: bob"));
  EXPECT_THAT(reconciliation_run({{"mode", "incremental"}, {"since", 10}, {"watermark", 12}, {"accounts", 1}}),
              HasSubstr("incremental since 10, watermark 12: 1 accounts"));
  EXPECT_THAT(reconciliation_reports({{"reports", {{{"report_id", 9}, {"mode", "incremental"}, {"since", 7}}}}}),
              HasSubstr("incremental"));
  const json running = {{"audit_id", 4},
                        {"state", "running"},
                        {"accounts_checked", 250},
                        {"accounts_total", 1000},
                        {"progress", 0.25},
                        {"differences", 1},
                        {"accounts_with_differences", {{{"account_id", "bob"}, {"difference", 3}}}},
                        {"frozen", {"bob"}}};
  EXPECT_THAT(audit(running), HasSubstr("audit 4: running, 250 of 1000 accounts (25.0 %), 1 with differences"));
  EXPECT_THAT(audit(running), HasSubstr("frozen: bob"));
  EXPECT_THAT(audits({{"audits", {running}}}), HasSubstr("25.0 %"));
}

TEST(TallyctlRender, ClustersSayWhoTakesWritesAndTheLastFailover) {
  EXPECT_THAT(clusters({{"configured", false}, {"formations", json::array()}}), HasSubstr("no replicated clusters"));
  const json node{{"name", "node_2"},    {"host", "127.0.0.1"}, {"port", 5433},  {"state", "primary"},
                  {"goal", "primary"},   {"health", "good"},    {"timeline", 3}, {"lag_bytes", 0},
                  {"synchronous", true}, {"report_age_ms", 400}};
  const json view{{"configured", true},
                  {"monitor_reachable", true},
                  {"formations",
                   {{{"formation", "shard_0"},
                     {"primary", "node_2"},
                     {"writable", true},
                     {"synchronous_standbys", 2},
                     {"failovers", 2},
                     {"last_failover", {{"node", "node_2"}, {"seconds_ago", 75}}},
                     {"nodes", {node}}}}}};
  const auto text = clusters(view);
  EXPECT_THAT(text, HasSubstr("formation shard_0: primary node_2, writable, 2 synchronous standbys, 2 failovers, the "
                              "last 75 s ago to node_2"));
  EXPECT_THAT(text, HasSubstr("node_2  127.0.0.1:5433  primary  primary  good"));
  auto lost = view;
  lost["monitor_reachable"] = false;
  lost["formations"][0]["writable"] = false;
  lost["formations"][0]["last_failover"] = nullptr;
  EXPECT_THAT(clusters(lost), HasSubstr("the monitor does not answer"));
  EXPECT_THAT(clusters(lost), HasSubstr("NOT writable, 2 synchronous standbys, 2 failovers\n"));
}

TEST(TallyctlUrl, OnlyHttpHostAndPort) {
  auto e = parse_url("http://127.0.0.1:8080");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 8080);
  EXPECT_EQ(parse_url("http://gateway/")->port, 80);
  for (const char* bad :
       {"https://x:1", "127.0.0.1:8080", "http://x:1/v1", "http://x:1?a=b", "http://:1", "", "http://x:0"})
    EXPECT_FALSE(parse_url(bad)) << bad;
}

}  // namespace
}  // namespace tally::ctl
