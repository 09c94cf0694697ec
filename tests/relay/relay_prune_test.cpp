// The outbox pruner on a real PostgreSQL, for a shard's outbox and the saga
// store's: it removes exactly the events every registered consumer has
// delivered (and that are old enough), in batches; a consumer that stopped
// holds the outbox, and when it resumes it reads every event after its
// cursor; the backlog of each consumer is a metric.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/metrics/metrics.hpp"
#include "common/migrate/migrate.hpp"
#include "relay/outbox/reader.hpp"
#include "relay/service/pruner.hpp"
#include "tests/relay/pg_session.hpp"
#include "tests/support/pg_fixture.hpp"
#include "tests/support/run_coroutine.hpp"

namespace tally::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using relay_test::event_sql;

std::string saga_event_sql(const std::string& saga_id) {
  return "INSERT INTO outbox_event (tenant, saga_id, saga_version, event_type, payload) VALUES ('t', '" + saga_id +
         "', 1, 'saga.state', '{\"saga_id\":\"" + saga_id + "\",\"state\":\"running\"}')";
}

struct fixture_kind {
  source_kind kind;
  const char* migrations;
  std::string (*event)(const std::string&);
  const char* object;  // the column naming the event's object
};

class RelayPrune : public ::testing::TestWithParam<fixture_kind> {
 protected:
  void SetUp() override {
    db_ = test::create_database("relay_prune");
    migrate::apply(db_, migrate::load(test::source_dir() + "/migrations/" + GetParam().migrations));
  }
  source_config source() const { return {"src", GetParam().kind, db_}; }

  // One event per name, each in its own transaction, in this order.
  void write(const std::vector<std::string>& names) {
    for (const auto& n : names) test::exec_sql(db_, GetParam().event(n));
  }
  // Saves `consumer`'s cursor at the event of object `name`.
  void delivered_up_to(const std::string& consumer, const std::string& name) {
    test::exec_sql(db_, "INSERT INTO relay_cursor (consumer, tx_id, id) SELECT '" + consumer +
                            "', tx_id, id FROM outbox_event WHERE " + GetParam().object + " = '" + name +
                            "' ON CONFLICT (consumer) DO UPDATE SET tx_id = EXCLUDED.tx_id, id = EXCLUDED.id");
  }
  std::vector<std::string> left() const {
    std::vector<std::string> out;
    for (const auto& row :
         test::query_rows(db_, std::string("SELECT ") + GetParam().object + " FROM outbox_event ORDER BY tx_id, id"))
      out.push_back(row[0]);
    return out;
  }
  void age(const std::string& name, const std::string& interval) {
    test::exec_sql(db_, "UPDATE outbox_event SET created_at = now() - interval '" + interval + "' WHERE " +
                            GetParam().object + " = '" + name + "'");
  }
  prune_pass prune(std::vector<std::string> consumers, prune_options options, metrics::registry& registry) {
    prune_pass pass;
    test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
      outbox_pruner pruner(io.get_executor(), source(), std::move(consumers), registry, options);
      auto err = co_await pruner.async_pass(pass);
      EXPECT_FALSE(err) << err.message;
    });
    return pass;
  }
  prune_pass prune(std::vector<std::string> consumers, prune_options options = at_any_age()) {
    metrics::registry registry;
    return prune(std::move(consumers), options, registry);
  }
  static prune_options at_any_age() {
    prune_options o;
    o.min_age = 0ms;
    return o;
  }
  std::string db_;
};

TEST_P(RelayPrune, RemovesExactlyWhatEveryConsumerDelivered) {
  write({"a", "b", "c", "d", "e"});
  delivered_up_to("projection", "d");
  delivered_up_to("push:g0", "b");
  auto pass = prune({"projection", "push:g0"});
  EXPECT_EQ(pass.deleted, 2);
  EXPECT_EQ(left(), (std::vector<std::string>{"c", "d", "e"}));
  delivered_up_to("push:g0", "e");
  EXPECT_EQ(prune({"projection", "push:g0"}).deleted, 2);
  EXPECT_EQ(left(), (std::vector<std::string>{"e"}));
}

TEST_P(RelayPrune, ACursorRowRegistersAConsumerThisRelayDoesNotDeliver) {
  write({"a", "b", "c"});
  delivered_up_to("projection", "c");
  delivered_up_to("push:elsewhere", "a");  // another relay instance's consumer
  EXPECT_EQ(prune({"projection"}).deleted, 1);
  EXPECT_EQ(left(), (std::vector<std::string>{"b", "c"}));
}

// A configured consumer that never saved a cursor (its gateway was down from
// the start) holds every event; when it resumes it reads them all.
TEST_P(RelayPrune, AStoppedConsumerHoldsTheOutboxAndGetsEveryEventWhenItResumes) {
  write({"a", "b", "c"});
  delivered_up_to("projection", "c");
  metrics::registry registry;
  auto pass = prune({"projection", "push:g0"}, at_any_age(), registry);
  EXPECT_EQ(pass.deleted, 0);
  EXPECT_FALSE(pass.bound);
  EXPECT_EQ(left(), (std::vector<std::string>{"a", "b", "c"}));
  const auto metrics = registry.render();
  EXPECT_NE(metrics.find(R"(tally_relay_outbox_backlog_events{consumer="push:g0",source="src"} 3)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(tally_relay_outbox_backlog_events{consumer="projection",source="src"} 0)"),
            std::string::npos)
      << metrics;

  std::vector<std::string> resumed;
  test::run_coroutine([&](asio::io_context& io) -> asio::awaitable<void> {
    outbox_reader consumer(io.get_executor(), source(), "push:g0", 5s, 100ms);
    bool holder = false;
    auto err = co_await consumer.async_take_lock(holder);
    EXPECT_FALSE(err) << err.message;
    saved_cursor saved;
    err = co_await consumer.async_load_cursor(saved);
    EXPECT_FALSE(err) << err.message;
    std::vector<outbox_event> events;
    err = co_await consumer.async_next(saved.at, 100, events);
    EXPECT_FALSE(err) << err.message;
    for (const auto& e : events) resumed.push_back(e.object_id);
    if (events.empty()) co_return;
    const cursor last{events.back().tx_id, events.back().id};
    err = co_await consumer.async_save_cursor(last, saved.source_timeline);
    EXPECT_FALSE(err) << err.message;
  });
  EXPECT_EQ(resumed, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(prune({"projection", "push:g0"}).deleted, 3);
  EXPECT_TRUE(left().empty());
}

// Only the leading run of old events goes: a young one stops the pass, and
// an older event behind it waits for the next.
TEST_P(RelayPrune, EventsYoungerThanTheMinimumAgeStayDeliveredOrNot) {
  write({"a", "b", "c", "d"});
  for (const auto* n : {"a", "b", "d"}) age(n, "2 hours");
  delivered_up_to("projection", "d");
  prune_options options;
  options.min_age = 3600s;
  EXPECT_EQ(prune({"projection"}, options).deleted, 2);
  EXPECT_EQ(left(), (std::vector<std::string>{"c", "d"}));
  age("c", "90 minutes");
  EXPECT_EQ(prune({"projection"}, options).deleted, 2);
  EXPECT_TRUE(left().empty());
}

TEST_P(RelayPrune, DeletesInBatchesUntilTheBound) {
  std::vector<std::string> names;
  for (int i = 0; i < 23; ++i) names.push_back("o" + std::to_string(100 + i));
  write(names);
  delivered_up_to("projection", "o120");
  auto options = at_any_age();
  options.batch = 4;
  metrics::registry registry;
  EXPECT_EQ(prune({"projection"}, options, registry).deleted, 21);
  EXPECT_EQ(left(), (std::vector<std::string>{"o121", "o122"}));
  EXPECT_NE(registry.render().find(R"(tally_relay_outbox_pruned_total{source="src"} 21)"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Outboxes, RelayPrune,
    ::testing::Values(fixture_kind{source_kind::shard, "shard", event_sql, "account_id"},
                      fixture_kind{source_kind::orchestrator, "orchestrator", saga_event_sql, "saga_id"}),
    [](const auto& param) { return std::string(param.param.kind == source_kind::shard ? "Shard" : "SagaStore"); });

}  // namespace
}  // namespace tally::relay
