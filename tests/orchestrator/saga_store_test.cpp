// The saga store against a real PostgreSQL: idempotent creation, writes
// fenced by lease and version, claims that skip live leases and never hand
// one saga to two instances.
#include "orchestrator/store/saga_store.hpp"

#include <gtest/gtest.h>

#include <set>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "orchestrator/saga/codec.hpp"
#include "tests/orchestrator/sagas.hpp"
#include "tests/orchestrator/store_fixture.hpp"

namespace tally::orch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace testing;

class SagaStore : public store_test {
 protected:
  // A transfer started by the engine at t0 (its hold in flight).
  saga started(std::string id, std::string biz_id = "t-1") const {
    auto s = transfer_saga(std::move(id));
    s.biz_id = std::move(biz_id);
    engine_for("transfer").start(s, t0);
    return s;
  }
};

TEST_F(SagaStore, CreateIsIdempotentOnTheBusinessKey) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    auto first = co_await store.async_create(started("sg_1"), saga_type::transfer, "hash-1", t0);
    EXPECT_FALSE(first.error) << first.error.message;
    EXPECT_EQ(first.outcome, saga_store::created::inserted);
    EXPECT_EQ(first.saga.version, 1);

    // A repeat mints a new id; the stored saga wins.
    auto again = co_await store.async_create(started("sg_2"), saga_type::transfer, "hash-1", t0 + 5ms);
    EXPECT_EQ(again.outcome, saga_store::created::replayed);
    EXPECT_EQ(again.saga.s.id, "sg_1");
    EXPECT_EQ(again.saga.s.input, first.saga.s.input);
    EXPECT_EQ(again.saga.s.calls, first.saga.s.calls);

    auto other = co_await store.async_create(started("sg_3"), saga_type::transfer, "hash-2", t0);
    EXPECT_EQ(other.outcome, saga_store::created::conflict);
    EXPECT_EQ(other.saga.s.id, "sg_1");

    // The same biz_id under another type is another saga.
    auto credit = co_await store.async_create(started("sg_4"), saga_type::credit, "hash-1", t0);
    EXPECT_EQ(credit.outcome, saga_store::created::inserted);
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM outbox_event"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM saga WHERE lease_owner = 'a' AND wake_at IS NOT NULL"), 2);
}

// With require_synchronous_standby on a server that has no synchronous
// standby (this one; a promoted standby before its own caught up), a
// create is refused and leaves nothing; a save likewise.
TEST_F(SagaStore, WithoutASynchronousStandbyWritesAreRefusedAndLeaveNothing) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store plain(pool, "a", 1s, 3s), guarded(pool, "a", 1s, 3s, true);
    auto created = co_await plain.async_create(started("sg_1"), saga_type::transfer, "hash-1", t0);
    EXPECT_FALSE(created.error) << created.error.message;
    auto refused = co_await guarded.async_create(started("sg_2", "t-2"), saga_type::transfer, "hash-2", t0);
    EXPECT_EQ(refused.error.code, pg::errc::no_synchronous_standby) << refused.error.message;
    auto s = created.saga.s;
    engine_for("transfer").on_answer(s, {0, 0, false}, ok(), t0 + 5ms);
    saga_write w{&s, 1, true, true, {}};
    auto saved = co_await guarded.async_save(std::span(&w, 1), t0 + 5ms);
    EXPECT_EQ(saved.error.code, pg::errc::no_synchronous_standby) << saved.error.message;
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM saga WHERE version = 1"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM outbox_event"), 1);
}

TEST_F(SagaStore, WritesNeedTheLeaseAndTheVersionTheyRead) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store a(pool, "a", 1s, 3s), b(pool, "b", 1s, 3s);
    auto s = started("sg_w");
    auto created = co_await a.async_create(s, saga_type::transfer, "h", t0);
    EXPECT_EQ(created.outcome, saga_store::created::inserted);

    engine_for("transfer").on_answer(s, {0, 0, false}, ok(), t0 + 5ms);
    saga_write w{&s, 1, true, true, {}};
    w.attempts.push_back({"hold_source", 0, false, 1, "s0", R"({"type":"hold"})", t0, "succeeded", "", t0 + 5ms});
    auto saved = co_await a.async_save(std::span(&w, 1), t0 + 5ms);
    EXPECT_FALSE(saved.error) << saved.error.message;
    EXPECT_EQ(saved.versions, std::vector<std::int64_t>{2});

    auto stale = co_await a.async_save(std::span(&w, 1), t0 + 6ms);  // still names version 1
    EXPECT_EQ(stale.versions, std::vector<std::int64_t>{0});
    saga_write by_b{&s, 2, true, true, {}};
    auto foreign = co_await b.async_save(std::span(&by_b, 1), t0 + 6ms);  // right version, no lease
    EXPECT_EQ(foreign.versions, std::vector<std::int64_t>{0});

    // The credit's attempt is recorded once answered.
    saga_write answered{&s, 2, false, true, {}};
    answered.attempts.push_back(
        {"credit_destination", 0, false, 1, "s1", R"({"type":"credit"})", t0 + 5ms, "transport", "timeout", t0 + 2s});
    auto third = co_await a.async_save(std::span(&answered, 1), t0 + 2s);
    EXPECT_EQ(third.versions, std::vector<std::int64_t>{3});

    saga_write both{&s, 3, false, true, {}};
    both.attempts.push_back(
        {"capture_source", 0, false, 1, "s0", R"({"type":"capture"})", t0 + 2s, "succeeded", "", t0 + 2s + 5ms});
    auto fourth = co_await a.async_save(std::span(&both, 1), t0 + 2s + 5ms);
    EXPECT_FALSE(fourth.error) << fourth.error.message;
    EXPECT_EQ(fourth.versions, std::vector<std::int64_t>{4});

    auto got = co_await a.async_get("sg_w");
    EXPECT_FALSE(got.error) << got.error.message;
    if (got.sagas.size() == 1) {
      EXPECT_EQ(got.sagas[0].version, 4);
      EXPECT_EQ(got.sagas[0].s.calls, s.calls);
      EXPECT_EQ(got.sagas[0].s.wake, s.wake);
      EXPECT_EQ(got.sagas[0].s.state, saga_state::running);
    } else {
      ADD_FAILURE() << "get found " << got.sagas.size();
    }
  });
  EXPECT_EQ(count("SELECT version FROM saga WHERE saga_id = 'sg_w'"), 4);
  EXPECT_EQ(count("SELECT count(*) FROM saga_step WHERE saga_id = 'sg_w'"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM saga_step WHERE step = 'capture_source' AND outcome = 'succeeded'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM saga_step WHERE outcome = 'transport' AND code = 'timeout'"), 1);
  // Events: created, and the one write that said the state changed and won.
  EXPECT_EQ(count("SELECT count(*) FROM outbox_event WHERE saga_id = 'sg_w'"), 2);
}

// A batch is written column-wise, a round of statements per write of the
// same saga: every write gets its own answer, as if it went alone.
TEST_F(SagaStore, OneBatchAnswersEveryWriteAsIfItWentAlone) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store store(pool, "a", 1s, 3s);
    auto held = started("sg_held", "t-held");
    auto created = co_await store.async_create(held, saga_type::transfer, "h", t0);
    EXPECT_EQ(created.outcome, saga_store::created::inserted);

    auto fresh = started("sg_fresh", "t-fresh");
    auto taken = started("sg_taken", "t-held");    // the key of sg_held
    auto twin_a = started("sg_twin_a", "t-twin");  // two new sagas with one key
    auto twin_b = started("sg_twin_b", "t-twin");
    auto after_hold = held;
    engine_for("transfer").on_answer(after_hold, {0, 0, false}, ok(), t0 + 5ms);
    const step_attempt hold_answered{"hold_source",        0,  false,       1,  "s0",
                                     R"({"type":"hold"})", t0, "succeeded", "", t0 + 5ms};
    auto credit_answered = hold_answered;
    credit_answered.step = "credit_destination";
    std::vector<saga_write> batch{
        {&fresh, 0, true, true, {}, saga_type::transfer, "h"},
        {&held, 1, false, true, {}},
        {&taken, 0, true, true, {}, saga_type::transfer, "h"},
        {&after_hold, 2, true, true, {hold_answered}},  // the second write of sg_held, on the first
        {&twin_a, 0, true, true, {}, saga_type::transfer, "h2"},
        {&twin_b, 0, true, true, {}, saga_type::transfer, "h2"},
        {&after_hold, 2, true, true, {credit_answered}},  // names a version the batch moved past
    };
    auto saved = co_await store.async_save(batch, t0 + 5ms);
    EXPECT_FALSE(saved.error) << saved.error.message;
    EXPECT_EQ(saved.versions, (std::vector<std::int64_t>{1, 2, 0, 3, 1, 0, 0}));

    auto got = co_await store.async_get("sg_held");
    EXPECT_EQ(got.sagas.size(), 1u);
    if (!got.sagas.empty()) {
      EXPECT_EQ(got.sagas[0].version, 3);
      EXPECT_EQ(got.sagas[0].s.calls, after_hold.calls);
    }
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM saga WHERE saga_id IN ('sg_taken', 'sg_twin_b')"), 0);
  // Events: three creates, and the one save that changed the state.
  EXPECT_EQ(count("SELECT count(*) FROM outbox_event"), 4);
  EXPECT_EQ(count("SELECT count(*) FROM outbox_event WHERE saga_id = 'sg_held'"), 2);
  // Attempts of the writes that wrote only: sg_held's hold, by its second write.
  EXPECT_EQ(count("SELECT count(*) FROM saga_step"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM saga_step WHERE saga_id = 'sg_held' AND step = 'hold_source'"), 1);
}

TEST_F(SagaStore, ClaimSkipsLiveLeasesTakesExpiredOnesAndFencesTheOldHolder) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store a(pool, "a", 5s, 3s), b(pool, "b", 5s, 3s);
    auto s = started("sg_c");
    auto heartbeat = co_await a.async_renew(t0);  // a is alive until 5 s
    EXPECT_FALSE(heartbeat) << heartbeat.message;
    co_await a.async_create(s, saga_type::transfer, "h", t0);
    EXPECT_EQ(s.wake, t0 + 2s);  // the hold's timeout

    auto early = co_await b.async_claim(10, t0 + 2500ms);  // due, but a is alive
    EXPECT_FALSE(early.error) << early.error.message;
    EXPECT_TRUE(early.sagas.empty());
    co_await a.async_renew(t0 + 4s);  // a's leases now run to 9 s
    auto still_held = co_await b.async_claim(10, t0 + 6s);
    EXPECT_TRUE(still_held.sagas.empty());

    co_await b.async_renew(t0 + 10s);
    auto late = co_await b.async_claim(10, t0 + 10s);  // a died: its heartbeat lapsed
    EXPECT_EQ(late.sagas.size(), 1u);
    if (late.sagas.size() == 1) {
      EXPECT_EQ(late.sagas[0].s.id, "sg_c");
      EXPECT_EQ(late.sagas[0].version, 2);
      EXPECT_EQ(late.sagas[0].s.calls, s.calls);
    }

    saga_write old{&s, 1, true, true, {}};
    auto fenced = co_await a.async_save(std::span(&old, 1), t0 + 11s);
    EXPECT_EQ(fenced.versions, std::vector<std::int64_t>{0});
    co_await a.async_renew(t0 + 11s);  // a comes back: b holds the saga now
    auto back = co_await a.async_claim(10, t0 + 11s);
    EXPECT_TRUE(back.sagas.empty());
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga WHERE lease_owner = 'b'"), 1);
}

// A claim whose COMMIT's answer is lost leaves sagas leased to a live
// instance that does not drive them: that instance claims them again once
// they have been due for a lease period, and not before.
TEST_F(SagaStore, AnInstanceClaimsAgainItsOwnSagasLongOverdue) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store a(pool, "a", 5s, 3s);
    auto s = started("sg_o");
    co_await a.async_renew(t0);
    co_await a.async_create(s, saga_type::transfer, "h", t0);  // due at t0 + 2 s
    co_await a.async_renew(t0 + 4s);
    auto driven = co_await a.async_claim(10, t0 + 4s);  // due, but only for 2 s: its driver has it
    EXPECT_FALSE(driven.error) << driven.error.message;
    EXPECT_TRUE(driven.sagas.empty());
    co_await a.async_renew(t0 + 7500ms);
    auto overdue = co_await a.async_claim(10, t0 + 7500ms);  // due for 5.5 s, a still alive
    EXPECT_EQ(overdue.sagas.size(), 1u);
    if (overdue.sagas.size() == 1) {
      EXPECT_EQ(overdue.sagas[0].version, 2);
    }
    saga_write old{&s, 1, true, true, {}};
    auto fenced = co_await a.async_save(std::span(&old, 1), t0 + 8s);  // the driver it may have had
    EXPECT_EQ(fenced.versions, std::vector<std::int64_t>{0});
  });
  EXPECT_EQ(count("SELECT version FROM saga WHERE saga_id = 'sg_o'"), 2);
}

TEST_F(SagaStore, HeartbeatsOfInstancesGoneForADayAreForgotten) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store gone(pool, "gone", 1s, 3s), recent(pool, "recent", 1s, 3s), a(pool, "a", 1s, 3s);
    co_await gone.async_renew(t0);
    co_await recent.async_renew(t0 + 20h);
    co_await a.async_renew(t0 + 25h);  // "gone" has been dead for a day, "recent" for 5 hours
  });
  EXPECT_EQ(count("SELECT count(*) FROM orchestrator_instance WHERE instance = 'gone'"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM orchestrator_instance WHERE instance IN ('recent', 'a')"), 2);
}

TEST_F(SagaStore, FinishedSagasLetGoAndAreNeverClaimed) {
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store a(pool, "a", 1s, 3s);
    auto s = started("sg_f");
    co_await a.async_create(s, saga_type::transfer, "h", t0);
    engine_for("transfer").on_answer(s, {0, 0, false}, rejected("insufficient_funds"), t0 + 1ms);
    EXPECT_EQ(s.state, saga_state::failed);
    saga_write w{&s, 1, true, true, {}};
    auto saved = co_await a.async_save(std::span(&w, 1), t0 + 1ms);
    EXPECT_EQ(saved.versions, std::vector<std::int64_t>{2});
    auto claimed = co_await a.async_claim(10, t0 + 1h);
    EXPECT_TRUE(claimed.sagas.empty());
    auto got = co_await a.async_get("sg_f");
    EXPECT_EQ(got.sagas.size(), 1u);
    if (!got.sagas.empty()) {
      EXPECT_EQ(got.sagas[0].s.state, saga_state::failed);
      EXPECT_EQ(got.sagas[0].s.error, s.error);
    }
  });
  EXPECT_EQ(count("SELECT count(*) FROM saga WHERE lease_owner IS NULL AND wake_at IS NULL AND error_code = "
                  "'insufficient_funds'"),
            1);
}

TEST_F(SagaStore, ConcurrentClaimsNeverShareASaga) {
  constexpr int sagas = 40;
  std::set<std::string> by_a, by_b;
  run_on_pool([&](pg::pool& pool) -> asio::awaitable<void> {
    saga_store creator(pool, "gone", 1s, 3s), a(pool, "a", 10s, 3s), b(pool, "b", 10s, 3s);
    for (int i = 0; i < sagas; ++i)
      co_await creator.async_create(started("sg_" + std::to_string(i), "t-" + std::to_string(i)), saga_type::transfer,
                                    "h", t0);
    const auto later = t0 + 1h;  // "gone" never had a heartbeat
    co_await a.async_renew(later);
    co_await b.async_renew(later);
    auto take = [&](saga_store& st, std::set<std::string>& mine) -> asio::awaitable<void> {
      for (int round = 0; round < 20; ++round) {
        auto r = co_await st.async_claim(3, later);
        EXPECT_FALSE(r.error) << r.error.message;
        for (const auto& c : r.sagas) mine.insert(c.s.id);
      }
    };
    using namespace asio::experimental::awaitable_operators;
    co_await (take(a, by_a) && take(b, by_b));
  });
  std::set<std::string> both;
  for (const auto& id : by_a) {
    EXPECT_FALSE(by_b.contains(id)) << id << " claimed twice";
    both.insert(id);
  }
  both.insert(by_b.begin(), by_b.end());
  EXPECT_EQ(both.size(), static_cast<std::size_t>(sagas));
}

}  // namespace
}  // namespace tally::orch
