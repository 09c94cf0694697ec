// Operators' queries and the saga store's upkeep on a real PostgreSQL: every
// list filter starts in an index on a populated store (no sequential scan
// of saga, in the custom plan and the generic one), lists are newest first
// and page without gaps or repeats in either order, the counts the
// triggers keep equal a count of the rows (and survive the fold of ended
// sessions), and compaction removes exactly the attempts of settled sagas
// past the retention.
#include <gtest/gtest.h>

#include <libpq-fe.h>

#include <memory>
#include <set>

#include "common/contract/saga_id.hpp"
#include "common/migrate/migrate.hpp"
#include "common/pg/pool.hpp"
#include "orchestrator/store/saga_store.hpp"
#include "tests/orchestrator/sagas.hpp"
#include "tests/orchestrator/store_fixture.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::orch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace testing;

std::string saga_id_at(instant t, std::uint8_t n) {
  std::array<std::uint8_t, 10> random{};
  random[9] = n;
  return contract::new_saga_id(std::chrono::sys_time<std::chrono::milliseconds>(t.time_since_epoch()), random);
}

TEST(SagaListQuery, TheFirstIdOfAMillisecondBoundsItsSagas) {
  const auto at = t0 + 7ms;
  EXPECT_LE(first_saga_id_at(at), saga_id_at(at, 0));
  EXPECT_LT(first_saga_id_at(at), saga_id_at(at, 200));
  EXPECT_LT(saga_id_at(at - 1ms, 255), first_saga_id_at(at));
  EXPECT_TRUE(contract::is_saga_id(first_saga_id_at(at)));
}

// A blocking session for EXPLAIN.
class session {
 public:
  explicit session(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str()), &PQfinish) {
    if (PQstatus(c_.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c_.get()));
  }
  std::string one(const std::string& sql, const std::vector<pg::param>& params = {}) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexecParams(c_.get(), sql.c_str(), static_cast<int>(values.size()),
                                                                 nullptr, values.data(), nullptr, nullptr, 0),
                                                    &PQclear);
    const auto s = PQresultStatus(r.get());
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) throw std::runtime_error(PQerrorMessage(c_.get()));
    std::string out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.append(PQgetvalue(r.get(), i, 0)).append("\n");
    return out;
  }
  std::string literal(const pg::param& p) {
    if (!p) return "NULL";
    std::unique_ptr<char, decltype(&PQfreemem)> q(PQescapeLiteral(c_.get(), p->c_str(), p->size()), &PQfreemem);
    return q.get();
  }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> c_;
};

class SagaStoreAtScale : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(tally::test::pg_conninfo(tally::test::create_database("orch_lists")));
    migrate::apply(*db_, migrate::load(tally::test::source_dir() + "/migrations/orchestrator"));
    // 200,000 sagas over 5 tenants and every type, mostly settled, one in a
    // hundred still running (some past their deadline), in id order one
    // second apart.
    tally::test::exec_sql(
        *db_,
        "INSERT INTO saga (saga_id, tenant, type, biz_id, request_hash, workflow, input, state, progress, created_at,"
        " updated_at, deadline, version)"
        " SELECT 'sg_0' || lpad(i::text, 25, '0'), 't' || (i % 5), (ARRAY['credit', 'deduct', 'refund', 'transfer',"
        "  'batch_deduct'])[1 + (i / 5) % 5], 'b' || i, 'h', 'credit',"
        "  CASE WHEN (i / 5) % 5 = 3 THEN jsonb_build_object('source', 'a' || (i % 997), 'destination',"
        "   'a' || (i % 991), 'amount', 1) ELSE jsonb_build_object('account', 'a' || (i % 997), 'amount', 1) END,"
        "  CASE WHEN i % 100 = 0 THEN 'running' WHEN i % 41 = 0 THEN 'failed' ELSE 'completed' END, '{}',"
        "  now() - (200000 - i) * interval '1 second', now(),"
        "  now() + CASE WHEN i % 200 = 0 THEN interval '-1 hour' ELSE interval '1 hour' END, 1"
        " FROM generate_series(1, 200000) i");
    tally::test::exec_sql(*db_, "ANALYZE saga");
  }
  static void TearDownTestSuite() {
    delete db_;
    db_ = nullptr;
  }

  // The plan of the filter's statement, custom (the parameters' values
  // known) or generic (what a prepared statement may settle on).
  static std::string plan(const saga_filter& f, bool generic) {
    session s(*db_);
    auto q = saga_list_query(f, "s.saga_id, s.state");
    s.one(std::string(pg::batch_writer_session_sql));  // as the orchestrator's sessions are
    if (!generic) return s.one("EXPLAIN " + q.sql, q.params);
    s.one("SET plan_cache_mode = force_generic_plan");
    s.one("PREPARE listed AS " + q.sql);
    std::string args;
    for (const auto& p : q.params) args += (args.empty() ? "" : ", ") + s.literal(p);
    return s.one("EXPLAIN EXECUTE listed(" + args + ")");
  }

  static std::string* db_;
};

std::string* SagaStoreAtScale::db_ = nullptr;

TEST_F(SagaStoreAtScale, EveryFilterStartsInAnIndex) {
  const auto now = instant_from_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  // Each filter, and the indexes its plan (as the orchestrator's sessions
  // plan it) must start in where only they serve it; a filter that any
  // index serves well (most sagas match it) only must not scan the table.
  struct filter_case {
    std::string name;
    saga_filter f;
    std::vector<std::string> indexes;
  };
  std::vector<filter_case> filters;
  auto add = [&](std::string name, std::vector<std::string> indexes, auto change) {
    saga_filter f{"t1"};
    change(f);
    filters.push_back({std::move(name), std::move(f), std::move(indexes)});
  };
  add("tenant", {"saga_by_tenant"}, [](saga_filter&) {});
  add("oldest first", {"saga_by_tenant"}, [](saga_filter& f) { f.oldest_first = true; });
  add("after a cursor", {}, [](saga_filter& f) { f.after = "sg_00000000000000000000100000"; });
  add("state completed", {}, [](saga_filter& f) { f.state = saga_state::completed; });
  add("state running", {"saga_by_state"}, [](saga_filter& f) { f.state = saga_state::running; });
  add("type", {"saga_by_type"}, [](saga_filter& f) { f.type = saga_type::batch_deduct; });
  add("biz_id", {"saga_tenant_biz_id_type_key"}, [](saga_filter& f) { f.biz_id = "b1001"; });
  add("account", {"saga_by_account", "saga_by_destination"}, [](saga_filter& f) { f.account = "a42"; });
  add("account, oldest first", {"saga_by_account", "saga_by_destination"}, [](saga_filter& f) {
    f.account = "a42";
    f.oldest_first = true;
  });
  add("overdue", {"saga_by_state"}, [&](saga_filter& f) { f.overdue_at = now; });
  add("created after", {}, [&](saga_filter& f) { f.created_after = now - 1h; });
  add("created before", {}, [&](saga_filter& f) { f.created_before = now - 20h; });
  add("created range and state", {}, [&](saga_filter& f) {
    f.created_after = now - 30h;
    f.created_before = now - 20h;
    f.state = saga_state::failed;
  });
  for (const auto& c : filters) {
    for (bool generic : {false, true}) {
      const auto p = plan(c.f, generic);
      const auto what = c.name + (generic ? " (generic plan)" : "") + ":\n" + p;
      EXPECT_EQ(p.find("Seq Scan"), std::string::npos) << what;
      EXPECT_NE(p.find("Index"), std::string::npos) << what;
      if (generic) continue;
      for (const auto& index : c.indexes) EXPECT_NE(p.find(" using " + index + " "), std::string::npos) << what;
    }
  }
}

class SagaLists : public store_test {
 protected:
  // Every page of the filter, in turn, through the store.
  static asio::awaitable<std::vector<std::string>> all_pages(saga_store& store, saga_filter f) {
    std::vector<std::string> ids;
    for (int page = 0; page < 100; ++page) {
      auto r = co_await store.async_list(f);
      EXPECT_FALSE(r.error) << r.error.message;
      for (const auto& st : r.sagas) ids.push_back(st.s.id);
      if (r.sagas.size() < f.limit) break;
      f.after = r.sagas.back().s.id;
    }
    co_return ids;
  }
};

// Eleven sagas created 1 ms apart, transfers and credits among them.
TEST_F(SagaLists, NewestFirstPagedWithoutGapsByAccountAndCreatedRange) {
  std::vector<std::string> created;
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    for (std::uint8_t i = 0; i < 11; ++i) {
      const auto at = t0 + std::chrono::milliseconds(i);
      auto s = i % 3 == 0 ? testing::transfer_saga(saga_id_at(at, i))
                          : testing::one_account(saga_id_at(at, i), i % 3 == 1 ? "alice" : "carol", 5);
      s.biz_id = "b" + std::to_string(i);
      s.created = at;
      testing::engine_for(i % 3 == 0 ? "transfer" : "credit").start(s, at);
      auto r = co_await store.async_create(s, i % 3 == 0 ? saga_type::transfer : saga_type::credit, "h", at);
      EXPECT_EQ(r.outcome, saga_store::created::inserted) << r.error.message;
      created.push_back(s.id);
    }
    saga_filter f{"t1"};
    f.limit = 4;
    const std::vector<std::string> newest(created.rbegin(), created.rend());
    const auto newest_first = co_await all_pages(store, f);
    EXPECT_EQ(newest_first, newest);
    f.oldest_first = true;
    const auto oldest_first = co_await all_pages(store, f);
    EXPECT_EQ(oldest_first, created);

    // alice: the credits of i = 1, 4, 7, 10 and every transfer's source (0, 3, 6, 9); bob: every destination.
    saga_filter alice{"t1"};
    alice.account = "alice";
    alice.limit = 3;
    const auto of_alice = co_await all_pages(store, alice);
    const std::vector<std::string> alices{created[10], created[9], created[7], created[6],
                                          created[4],  created[3], created[1], created[0]};
    EXPECT_EQ(of_alice, alices);
    saga_filter bob{"t1"};
    bob.account = "bob";
    const auto of_bob = co_await all_pages(store, bob);
    const std::vector<std::string> bobs{created[9], created[6], created[3], created[0]};
    EXPECT_EQ(of_bob, bobs);

    saga_filter range{"t1"};
    range.created_after = t0 + 3ms;
    range.created_before = t0 + 6ms;
    const auto in_range = co_await all_pages(store, range);
    const std::vector<std::string> ranged{created[5], created[4], created[3]};
    EXPECT_EQ(in_range, ranged);
    saga_filter other{"t2"};
    const auto of_other = co_await all_pages(store, other);
    EXPECT_TRUE(of_other.empty());
  });
}

// The counts the writing statements keep, against a count of the rows,
// after inserts, state changes in batches and a session's changes folded.
TEST_F(SagaLists, CountsByStateAreKeptWithoutAScanAndSurviveTheFold) {
  const auto by_rows = [&](const std::string& state) {
    return count("SELECT count(*) FROM saga WHERE tenant = 't1' AND state = '" + state + "'");
  };
  std::vector<saga> sagas;
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    for (std::uint8_t i = 0; i < 6; ++i) {
      auto s = testing::transfer_saga(saga_id_at(t0, i));
      s.biz_id = "c" + std::to_string(i);
      testing::engine_for("transfer").start(s, t0);
      sagas.push_back(s);
    }
    for (auto& s : sagas) co_await store.async_create(s, saga_type::transfer, "h", t0);
    // Three settle in one write round (one statement).
    std::vector<saga_write> writes;
    for (std::size_t i = 0; i < 3; ++i) {
      sagas[i].state = saga_state::completed;
      sagas[i].wake.reset();
      writes.push_back({&sagas[i], 1, true, false, {}});
    }
    auto saved = co_await store.async_save(writes, t0 + 1s);
    EXPECT_FALSE(saved.error) << saved.error.message;
    auto counts = co_await store.async_counts("t1", t0 + 1s);
    EXPECT_FALSE(counts.error) << counts.error.message;
    const std::vector<saga_state> states{saga_state::completed, saga_state::running};
    for (auto state : states)
      EXPECT_EQ(counts.by_state[state], by_rows(std::string(to_string(state)))) << to_string(state);
    EXPECT_EQ(counts.by_state[saga_state::completed], 3);
  });
  // Another session moves one to needs_attention and ends; the fold keeps its count.
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    sagas[3].state = saga_state::needs_attention;
    const saga_write w{&sagas[3], 1, true, false, {}};
    auto saved = co_await store.async_save(std::span(&w, 1), t0 + 1s);
    EXPECT_FALSE(saved.error) << saved.error.message;
    EXPECT_EQ(saved.versions, std::vector<std::int64_t>{2});
  });
  // The fold takes the rows of sessions that ended: the writers' backends are gone first.
  ASSERT_TRUE(tally::test::eventually([&] {
    return count(
               "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
               " AND pid <> pg_backend_pid()") == 0;
  }));
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    auto err = co_await store.async_fold_counts();
    EXPECT_FALSE(err) << err.message;
    auto counts = co_await store.async_counts("t1", t0 + 1s);
    const std::vector<saga_state> states{saga_state::completed, saga_state::running, saga_state::needs_attention};
    for (auto state : states)
      EXPECT_EQ(counts.by_state[state], by_rows(std::string(to_string(state)))) << to_string(state);
    EXPECT_EQ(counts.by_state[saga_state::needs_attention], 1);
  });
  // Only slot 0 and the live sessions' slots remain.
  EXPECT_EQ(count("SELECT count(*) FROM saga_state_count c WHERE slot <> 0 AND NOT EXISTS"
                  " (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.slot)"),
            0);
}

TEST_F(SagaLists, CompactionRemovesTheAttemptsOfSettledSagasPastTheRetentionOnly) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    // old settled, old running, recent settled: one attempt each.
    const std::vector<std::pair<instant, saga_state>> kinds{
        {t0, saga_state::completed}, {t0 + 1ms, saga_state::running}, {t0 + 48h, saga_state::completed}};
    std::uint8_t n = 0;
    for (const auto& [at, state] : kinds) {
      auto s = testing::transfer_saga(saga_id_at(at, n));
      s.biz_id = "k" + std::to_string(n++);
      s.created = at;
      testing::engine_for("transfer").start(s, at);
      co_await store.async_create(s, saga_type::transfer, "h", at);
      s.state = state;
      if (state == saga_state::completed) s.wake.reset();
      saga_write w{&s, 1, true, state != saga_state::completed, {}};
      w.attempts.push_back({"hold_source", 0, false, 1, "s0", R"({"type":"hold"})", at, "succeeded", "", at + 5ms});
      auto saved = co_await store.async_save(std::span(&w, 1), at + 5ms);
      EXPECT_EQ(saved.versions, std::vector<std::int64_t>{2}) << saved.error.message;
    }
    auto page = co_await store.async_compact(t0 + 24h, "", 2);  // a page of 2: then the rest
    EXPECT_FALSE(page.error) << page.error.message;
    EXPECT_EQ(page.sagas_read, 2);
    EXPECT_EQ(page.sagas, 1);
    EXPECT_EQ(page.attempts, 1);
    auto rest = co_await store.async_compact(t0 + 24h, page.last, 2);
    EXPECT_EQ(rest.sagas_read, 0);  // the recent one is past the bound
    auto got = co_await store.async_get(saga_id_at(t0, 0));
    EXPECT_EQ(got.sagas.size(), 1u);  // its row (input, progress, result) stays
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga_step"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM saga"), 3);
}

}  // namespace
}  // namespace tally::orch
