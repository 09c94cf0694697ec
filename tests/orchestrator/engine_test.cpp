// The saga engine, step by step: every expectation below is derived by hand
// from the rules in orchestrator/engine/engine.hpp.
#include "orchestrator/engine/engine.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/orchestrator/sagas.hpp"

namespace tally::orch {
namespace {

using namespace std::chrono_literals;
using namespace testing;

const instant t0{std::chrono::milliseconds(1'000'000'000)};

// `s` started at t0 whose first call (item 0's) got `a` at `at`.
saga first_answered(const engine& e, saga s, const answer& a, instant at) {
  e.start(s, t0);
  e.on_answer(s, {0, 0, false}, a, at);
  return s;
}

// A transfer started at t0 whose hold succeeded at `held`: the credit is in flight.
saga credit_in_flight(const engine& e, instant held = t0 + 5ms) {
  return first_answered(e, transfer_saga(), ok(), held);
}

TEST(Transfer, TheDestinationCreditCarriesTheHoldsLotsGroupedByExpiry) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  e.start(s, t0);
  const std::vector<lot_share> held = {{10, 5000, "a"}, {5, 5000, "b"}, {10, 9000, "c"}, {5, std::nullopt, "d"}};
  auto d = e.on_answer(s, {0, 0, false}, {answer_kind::succeeded, "", held}, t0 + 5ms);
  EXPECT_EQ(s.calls[0][0].lots, held);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::credit);
  EXPECT_EQ(d.send[0].lots, (std::vector<lot_share>{{15, 5000, "a"}, {10, 9000, "c"}, {5, std::nullopt, "d"}}));
  // A plain credit carries its own expiry, no lots.
  auto c = engine_for("credit");
  auto credit = one_account("sg_01CREDIT", "carol", 5);
  credit.input.expires_at = 7000;
  credit.input.rule_version = "r2";
  auto first = c.start(credit, t0);
  ASSERT_EQ(first.send.size(), 1u);
  EXPECT_EQ(first.send[0].expires_at, 7000);
  EXPECT_EQ(first.send[0].rule_version, "r2");
  EXPECT_TRUE(first.send[0].lots.empty());
}

TEST(Backoff, DoublesFromTheInitialDelayWithJitterAndStopsAtTheCap) {
  retry_policy p;
  p.initial_backoff = 100ms;
  p.max_backoff = 1000ms;
  auto none = [] { return 0.0; };
  auto full = [] { return 1.0; };
  EXPECT_EQ(backoff(p, 1, none), 50ms);   // half of 100
  EXPECT_EQ(backoff(p, 1, full), 100ms);  // all of 100
  EXPECT_EQ(backoff(p, 2, none), 100ms);  // half of 200
  EXPECT_EQ(backoff(p, 3, full), 400ms);
  EXPECT_EQ(backoff(p, 4, none), 400ms);  // half of 800
  EXPECT_EQ(backoff(p, 5, none), 500ms);  // 1600 capped at 1000
  EXPECT_EQ(backoff(p, 60, full), 1000ms);
}

TEST(Transfer, SuccessHoldsCreditsThenCaptures) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  auto d = e.start(s, t0);
  EXPECT_EQ(s.state, saga_state::running);
  EXPECT_EQ(s.deadline, t0 + 10s);  // the workflow's default deadline
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::hold);
  EXPECT_EQ(d.send[0].account, "alice");
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  EXPECT_EQ(d.send[0].amount, 30);
  EXPECT_EQ(d.send[0].attempt, 1);
  EXPECT_EQ(s.wake, t0 + 2s);  // the call's timeout comes before the deadline

  d = e.on_answer(s, {0, 0, false}, ok(), t0 + 5ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::credit);
  EXPECT_EQ(d.send[0].account, "bob");
  EXPECT_EQ(d.send[0].ref, (call_ref{1, 0, false}));

  d = e.on_answer(s, {1, 0, false}, ok(), t0 + 10ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
  EXPECT_EQ(d.send[0].account, "alice");
  EXPECT_EQ(d.send[0].amount, 0);  // the whole hold
  EXPECT_TRUE(e.past_pivot(s));

  d = e.on_answer(s, {2, 0, false}, ok(), t0 + 15ms);
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.state, saga_state::completed);
  EXPECT_FALSE(s.error);
  EXPECT_FALSE(s.wake);
}

TEST(Transfer, RejectedHoldFailsWithNothingToUndo) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  e.start(s, t0);
  auto d = e.on_answer(s, {0, 0, false}, rejected("insufficient_funds"), t0 + 5ms);
  EXPECT_TRUE(d.send.empty());  // a stored rejection took no effect: no release
  EXPECT_EQ(s.state, saga_state::failed);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->code, "insufficient_funds");
}

TEST(Transfer, RejectedCreditReleasesTheHoldThenFails) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  auto d = e.on_answer(s, {1, 0, false}, rejected("account_not_found"), t0 + 10ms);
  ASSERT_EQ(d.send.size(), 1u);  // no cancel_key for a stored rejection; straight to the release
  EXPECT_EQ(d.send[0].op, participant_op::release);
  EXPECT_EQ(d.send[0].account, "alice");
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  EXPECT_EQ(d.send[0].ref, (call_ref{0, 0, true}));
  EXPECT_EQ(s.state, saga_state::compensating);

  d = e.on_answer(s, {0, 0, true}, ok(), t0 + 15ms);
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "account_not_found");
}

// Default retry policy at jitter 0.5: attempt n waits half of
// min(5000, 25 * 2^(n-1)) plus half of the rest: 18, 37, 75, 150, ... ms.
TEST(Transfer, DeadlineBeforeThePivotCancelsTheCreditKeyThenReleases) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  // The destination shard is down: the credit's answer is lost.
  auto d = e.on_answer(s, {1, 0, false}, lost(), t0 + 20ms);
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.wake, t0 + 38ms);
  d = e.on_wake(s, t0 + 38ms);
  ASSERT_EQ(d.send.size(), 1u);  // the same key again
  EXPECT_EQ(d.send[0].op, participant_op::credit);
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  EXPECT_EQ(d.send[0].attempt, 2);

  d = e.on_wake(s, t0 + 10s);  // the deadline; attempt 2 still unanswered
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::cancel_key);
  EXPECT_EQ(d.send[0].account, "bob");
  EXPECT_EQ(d.send[0].target_type, "credit");
  EXPECT_EQ(d.send[0].target_id, "sg_01TRANSFER");
  EXPECT_EQ(s.state, saga_state::compensating);
  EXPECT_EQ(s.error->code, "deadline_exceeded");

  // The release waits until the barrier on the credit holds.
  d = e.on_answer(s, {1, 0, true}, {answer_kind::cancelled, ""}, t0 + 10s + 5ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  EXPECT_EQ(d.send[0].account, "alice");
  d = e.on_answer(s, {0, 0, true}, ok(), t0 + 10s + 10ms);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "deadline_exceeded");
}

TEST(Transfer, ACreditThatNeverReachedItsShardNeedsNoCancelAtTheDeadline) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  e.on_answer(s, {1, 0, false}, {answer_kind::not_delivered, "unreachable"}, t0 + 6ms);
  EXPECT_EQ(s.calls[1][0].forward.status, call_status::waiting);
  EXPECT_FALSE(s.calls[1][0].forward.delivered);
  auto d = e.on_wake(s, t0 + 10s);  // the deadline: the destination is still down
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);  // no cancel_key on the unreachable shard
  e.on_answer(s, d.send[0].ref, ok(), t0 + 10s + 5ms);
  EXPECT_EQ(s.state, saga_state::failed);  // API.md: a deadline ends a saga failed
  EXPECT_EQ(s.error->code, "deadline_exceeded");
}

TEST(Transfer, ACreditThatMayHaveArrivedOnceIsFencedEvenIfLaterAttemptsWereRefused) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  e.on_wake(s, t0 + 2005ms);  // no answer in time: it may be on its way
  EXPECT_TRUE(s.calls[1][0].forward.delivered);
  auto resend = e.on_wake(s, s.calls[1][0].forward.due);
  ASSERT_EQ(resend.send.size(), 1u);
  e.on_answer(s, resend.send[0].ref, {answer_kind::not_delivered, "unreachable"}, s.calls[1][0].forward.due + 1ms);
  auto d = e.on_wake(s, t0 + 10s);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::cancel_key);
}

TEST(Transfer, CancelKeyFindingTheCreditAppliedGoesForward) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  e.on_wake(s, t0 + 10s);  // credit unanswered at the deadline
  ASSERT_EQ(s.state, saga_state::compensating);
  auto d = e.on_answer(s, {1, 0, true}, {answer_kind::already_applied_succeeded, ""}, t0 + 10s + 5ms);
  ASSERT_EQ(d.send.size(), 1u);  // past the pivot after all: capture, never release
  EXPECT_EQ(d.send[0].op, participant_op::capture);
  EXPECT_EQ(s.state, saga_state::running);
  EXPECT_FALSE(s.error);
  e.on_answer(s, {2, 0, false}, ok(), t0 + 10s + 10ms);
  EXPECT_EQ(s.state, saga_state::completed);
}

TEST(Transfer, LateCreditSuccessDuringCompensationStillWaitsForTheBarrier) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);
  e.on_wake(s, t0 + 10s);
  auto d = e.on_answer(s, {1, 0, false}, ok(), t0 + 10s + 1ms);  // the lost reply turns up
  EXPECT_TRUE(d.send.empty());                                   // no release while the credit stands
  EXPECT_EQ(s.state, saga_state::compensating);
  d = e.on_answer(s, {1, 0, true}, {answer_kind::already_applied_succeeded, ""}, t0 + 10s + 2ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
}

TEST(Transfer, AfterThePivotOnlyForwardAndNeedsAttentionPastTheBudget) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e, t0);
  e.on_answer(s, {1, 0, false}, ok(), t0);
  auto now = t0;
  for (int attempt = 1; attempt < 10; ++attempt) {
    e.on_answer(s, {2, 0, false}, lost(), now);
    EXPECT_EQ(s.state, saga_state::running) << attempt;
    now = *s.wake;
    auto d = e.on_wake(s, now);
    ASSERT_EQ(d.send.size(), 1u);
    EXPECT_EQ(d.send[0].op, participant_op::capture);  // never a release after the pivot
    EXPECT_EQ(d.send[0].attempt, attempt + 1);
  }
  now += 1h;  // far past the deadline: no compensation after the pivot
  e.on_answer(s, {2, 0, false}, lost(), now);
  EXPECT_EQ(s.state, saga_state::needs_attention);
  EXPECT_NE(s.attention.find("capture_source"), std::string::npos) << s.attention;
  EXPECT_NE(s.attention.find("10 attempts"), std::string::npos) << s.attention;
  EXPECT_EQ(s.wake, now + 5s);  // still retried, slowly
  auto d = e.on_wake(s, now + 5s);
  ASSERT_EQ(d.send.size(), 1u);
  e.on_answer(s, {2, 0, false}, ok(), now + 5s + 1ms);  // the shard is back
  EXPECT_EQ(s.state, saga_state::completed);
  EXPECT_TRUE(s.attention.empty());
}

TEST(Transfer, CallTimeoutResendsTheSameKeyAfterBackoff) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  e.start(s, t0);
  auto d = e.on_wake(s, t0 + 2s);  // no answer within the call timeout
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.calls[0][0].forward.status, call_status::waiting);
  EXPECT_EQ(s.calls[0][0].forward.code, "timeout");
  EXPECT_EQ(s.wake, t0 + 2s + 18ms);
  d = e.on_wake(s, t0 + 2s + 18ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::hold);
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  EXPECT_EQ(d.send[0].attempt, 2);
}

TEST(Transfer, FrozenSourceFailsAndFencesTheHoldOff) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  e.start(s, t0);
  // Not stored by the shard: a duplicate of the hold could still land, so
  // the release (a tombstone if the hold never arrives) goes out.
  auto d = e.on_answer(s, {0, 0, false}, {answer_kind::retry, "account_frozen"}, t0 + 5ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  e.on_answer(s, {0, 0, true}, ok(), t0 + 10ms);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "account_frozen");
}

answer busy(std::chrono::milliseconds retry_after) {
  answer a{answer_kind::retry, "account_busy"};
  a.retry_after = retry_after;
  return a;
}

TEST(Transfer, ABusyAccountIsRetriedWithTheSameKeyNoSoonerThanTheShardSays) {
  auto e = engine_for("transfer");
  auto s = transfer_saga();
  e.start(s, t0);
  // The shard's 40 ms, plus half of it again at jitter 0.5 (10 ms): later than the backoff's 18 ms.
  auto d = e.on_answer(s, {0, 0, false}, busy(40ms), t0 + 5ms);
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.state, saga_state::running);
  EXPECT_EQ(s.calls[0][0].forward.status, call_status::waiting);
  EXPECT_EQ(s.calls[0][0].forward.code, "account_busy");
  EXPECT_EQ(s.wake, t0 + 55ms);
  d = e.on_wake(s, t0 + 55ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::hold);
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");  // the same key
  EXPECT_EQ(d.send[0].attempt, 2);
  // A pause shorter than the backoff: the backoff (attempt 2: 37 ms).
  d = e.on_answer(s, {0, 0, false}, busy(1ms), t0 + 60ms);
  EXPECT_EQ(s.wake, t0 + 97ms);
  d = e.on_wake(s, t0 + 97ms);
  ASSERT_EQ(d.send.size(), 1u);
  e.on_answer(s, {0, 0, false}, ok(), t0 + 100ms);
  e.on_answer(s, {1, 0, false}, ok(), t0 + 105ms);
  e.on_answer(s, {2, 0, false}, ok(), t0 + 110ms);
  EXPECT_EQ(s.state, saga_state::completed);
}

TEST(Transfer, ABusyAccountUntilTheDeadlineFollowsTheDeadlinePath) {
  auto e = engine_for("transfer");
  auto s = first_answered(e, transfer_saga(), busy(4000ms), t0 + 5ms);
  EXPECT_EQ(s.wake, t0 + 5005ms);
  auto d = e.on_wake(s, t0 + 5005ms);
  ASSERT_EQ(d.send.size(), 1u);
  e.on_answer(s, {0, 0, false}, busy(6000ms), t0 + 5010ms);
  EXPECT_EQ(s.wake, t0 + 10s);  // the deadline comes first
  d = e.on_wake(s, t0 + 10s);
  // The hold may have a copy on its way (it reached the shard): fenced off by its release.
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  EXPECT_EQ(s.state, saga_state::compensating);
  e.on_answer(s, {0, 0, true}, ok(), t0 + 10'005ms);
  EXPECT_EQ(s.state, saga_state::failed);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->code, "deadline_exceeded");
}

TEST(Transfer, ConflictNeedsAnOperator) {
  auto e = engine_for("transfer");
  auto s = first_answered(e, transfer_saga(), {answer_kind::conflict, ""}, t0 + 5ms);
  EXPECT_EQ(s.state, saga_state::needs_attention);
  EXPECT_NE(s.attention.find("idempotency conflict"), std::string::npos) << s.attention;
}

TEST(Transfer, AbortBeforeThePivotCompensatesAfterItIsRefused) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e, t0);
  decision d;
  EXPECT_EQ(e.abort(s, t0 + 1ms, d), engine::request_result::done);
  ASSERT_EQ(d.send.size(), 1u);  // the credit was in flight: cancel its key first
  EXPECT_EQ(d.send[0].op, participant_op::cancel_key);
  decision again;
  EXPECT_EQ(e.abort(s, t0 + 2ms, again), engine::request_result::already);
  EXPECT_TRUE(again.send.empty());
  e.on_answer(s, {1, 0, true}, {answer_kind::cancelled, ""}, t0 + 3ms);
  e.on_answer(s, {0, 0, true}, ok(), t0 + 4ms);
  EXPECT_EQ(s.state, saga_state::compensated);
  EXPECT_EQ(s.error->code, "aborted");

  auto late = first_answered(e, transfer_saga(), ok(), t0);
  e.on_answer(late, {1, 0, false}, ok(), t0);
  decision refused;
  EXPECT_EQ(e.abort(late, t0, refused), engine::request_result::invalid_state);
  EXPECT_TRUE(refused.send.empty());
}

TEST(Transfer, RecoverResendsTheCallInFlightAtOnceWithTheSameKey) {
  auto e = engine_for("transfer");
  auto s = credit_in_flight(e);  // the credit was sent at t0 + 5 ms; its timeout is t0 + 2005 ms
  auto d = e.recover(s, t0 + 100ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].ref, (call_ref{1, 0, false}));
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  EXPECT_EQ(d.send[0].attempt, 2);
  EXPECT_EQ(s.calls[1][0].forward.status, call_status::in_flight);
  EXPECT_EQ(s.calls[0][0].forward.status, call_status::succeeded);  // answered calls are left alone
  EXPECT_TRUE(e.recover(s, t0 + 100ms).send.size() == 1u);          // every recovery re-sends
  auto done = first_answered(e, transfer_saga(), rejected("insufficient_funds"), t0 + 5ms);
  EXPECT_TRUE(e.recover(done, t0 + 100ms).send.empty());  // a finished saga sends nothing
}

TEST(Transfer, RetryNowResendsAWaitingCallImmediately) {
  auto e = engine_for("transfer");
  auto s = first_answered(e, transfer_saga(), lost(), t0 + 1ms);
  decision d;
  EXPECT_EQ(e.retry_now(s, t0 + 2ms, d), engine::request_result::done);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].attempt, 2);
}

saga held_deduction(std::chrono::milliseconds hold_timeout = 60s) {
  auto s = one_account("sg_01HELD", "carol", 5);
  s.input.hold_timeout = hold_timeout;
  return s;
}

TEST(HeldDeduction, WaitsForConfirmThenCaptures) {
  auto e = engine_for("deduct_held");
  auto s = held_deduction();
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::hold);
  e.on_answer(s, {0, 0, false}, ok(), t0 + 5ms);
  EXPECT_EQ(s.state, saga_state::awaiting_confirmation);
  EXPECT_EQ(s.hold_deadline, t0 + 5ms + 60s);
  EXPECT_EQ(s.wake, t0 + 5ms + 60s);  // no deadline while waiting for the app

  d = {};
  EXPECT_EQ(e.confirm(s, t0 + 30s, d), engine::request_result::done);  // past the saga deadline: still captures
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
  EXPECT_EQ(s.wake, t0 + 32s);  // the capture's timeout, not the deadline long past (found by the simulation)
  decision twice;
  EXPECT_EQ(e.confirm(s, t0 + 30s, twice), engine::request_result::already);
  EXPECT_TRUE(twice.send.empty());
  e.on_answer(s, {1, 0, false}, ok(), t0 + 30s + 5ms);
  EXPECT_EQ(s.state, saga_state::completed);
  decision late_cancel;
  EXPECT_EQ(e.cancel(s, t0 + 31s, late_cancel), engine::request_result::invalid_state);
}

TEST(HeldDeduction, CancelReleasesAndEndsCompensated) {
  auto e = engine_for("deduct_held");
  auto s = first_answered(e, held_deduction(), ok(), t0 + 5ms);
  decision d;
  EXPECT_EQ(e.cancel(s, t0 + 1s, d), engine::request_result::done);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  e.on_answer(s, {0, 0, true}, ok(), t0 + 1s + 5ms);
  EXPECT_EQ(s.state, saga_state::compensated);
  EXPECT_EQ(s.error->code, "cancelled");
  decision again, confirm;
  EXPECT_EQ(e.cancel(s, t0 + 2s, again), engine::request_result::already);
  EXPECT_EQ(e.confirm(s, t0 + 2s, confirm), engine::request_result::invalid_state);
}

TEST(HeldDeduction, HoldTimeoutReleasesAutomatically) {
  auto e = engine_for("deduct_held");
  auto s = first_answered(e, held_deduction(500ms), ok(), t0);
  auto d = e.on_wake(s, t0 + 499ms);
  EXPECT_TRUE(d.send.empty());
  EXPECT_EQ(s.state, saga_state::awaiting_confirmation);
  d = e.on_wake(s, t0 + 500ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  decision cancel;  // the app cancels while the release is on its way: nothing more to do
  EXPECT_EQ(e.cancel(s, t0 + 500ms, cancel), engine::request_result::already);
  EXPECT_TRUE(cancel.send.empty());
  e.on_answer(s, {0, 0, true}, ok(), t0 + 501ms);
  EXPECT_EQ(s.state, saga_state::compensated);
  EXPECT_EQ(s.error->code, "hold_expired");
}

TEST(HeldDeduction, ConfirmBeforeTheHoldIsInIsRemembered) {
  auto e = engine_for("deduct_held");
  auto s = held_deduction();
  e.start(s, t0);
  decision d;
  EXPECT_EQ(e.confirm(s, t0 + 1ms, d), engine::request_result::done);
  EXPECT_TRUE(d.send.empty());  // the hold is still in flight
  d = e.on_answer(s, {0, 0, false}, ok(), t0 + 2ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
}

saga batch(std::size_t n) {
  saga s;
  s.id = "sg_01BATCH";
  s.tenant = "t1";
  for (std::size_t i = 0; i < n; ++i) s.input.items.push_back({"student-" + std::to_string(i), 1});
  return s;
}

TEST(BatchDeduct, HoldsEveryItemAtOnceThenCapturesThemAll) {
  auto e = engine_for("batch_deduct");
  auto s = batch(3);
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.send[i].op, participant_op::hold);
    EXPECT_EQ(d.send[i].account, "student-" + std::to_string(i));
    EXPECT_EQ(d.send[i].ref, (call_ref{0, i, false}));
  }
  EXPECT_TRUE(e.on_answer(s, {0, 2, false}, ok(), t0).send.empty());
  EXPECT_TRUE(e.on_answer(s, {0, 0, false}, ok(), t0).send.empty());
  d = e.on_answer(s, {0, 1, false}, ok(), t0);
  ASSERT_EQ(d.send.size(), 3u);
  for (const auto& c : d.send) EXPECT_EQ(c.op, participant_op::capture);
  EXPECT_TRUE(e.past_pivot(s));
  for (std::size_t i = 0; i < 3; ++i) e.on_answer(s, {1, i, false}, ok(), t0);
  EXPECT_EQ(s.state, saga_state::completed);
}

TEST(BatchDeduct, OneShortAccountReleasesEveryOtherHold) {
  auto e = engine_for("batch_deduct");
  auto s = first_answered(e, batch(3), ok(), t0);
  // Item 2 is still in flight when item 1 is refused.
  auto d = e.on_answer(s, {0, 1, false}, rejected("insufficient_funds"), t0 + 1ms);
  ASSERT_EQ(d.send.size(), 2u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  EXPECT_EQ(d.send[0].account, "student-0");
  EXPECT_EQ(d.send[1].op, participant_op::release);
  EXPECT_EQ(d.send[1].account, "student-2");  // may land later: the release fences it off
  e.on_answer(s, {0, 0, true}, ok(), t0 + 2ms);
  EXPECT_EQ(s.state, saga_state::compensating);
  e.on_answer(s, {0, 2, true}, ok(), t0 + 3ms);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "insufficient_funds");
}

TEST(BatchDeduct, AnUndoNoLongerNeededIsNotWaitedFor) {
  auto e = engine_for("batch_deduct");
  auto s = first_answered(e, batch(2), rejected("insufficient_funds"), t0 + 1ms);  // item 1's hold still in flight
  // Item 1's release overtakes its hold, whose late answer is the refusal
  // the tombstone causes: it never applied, so its release's fate no
  // longer matters, and the saga must not wake for it (found by the
  // simulation: it woke at its own instant forever).
  e.on_answer(s, {0, 1, false}, rejected("hold_released"), t0 + 2ms);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_FALSE(s.wake);
}

TEST(Credit, RejectionFailsAndUnknownOutcomeAtTheDeadlineIsSettledByCancelKey) {
  auto e = engine_for("credit");
  auto s = one_account("sg_01CREDIT", "dave", 7);
  s.input.memo = "welcome";
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::credit);
  EXPECT_EQ(d.send[0].memo, "welcome");
  e.on_answer(s, {0, 0, false}, rejected("account_not_found"), t0);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "account_not_found");

  auto u = one_account("sg_01CREDIT2", "dave", 7);
  e.start(u, t0);
  d = e.on_wake(u, t0 + 10s);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::cancel_key);
  e.on_answer(u, {0, 0, true}, {answer_kind::already_applied_other, "account_not_found"}, t0 + 10s);
  EXPECT_EQ(u.state, saga_state::failed);
  EXPECT_EQ(u.error->code, "deadline_exceeded");
}

TEST(Refund, CarriesTheOriginalKey) {
  auto e = engine_for("refund");
  auto s = one_account("sg_01REFUND", "erin", 3);
  s.input.original_type = "debit";
  s.input.original_key = "sg_01ORIGINAL";
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::refund);
  EXPECT_EQ(d.send[0].original_type, "debit");
  EXPECT_EQ(d.send[0].original_id, "sg_01ORIGINAL");
  EXPECT_EQ(d.send[0].biz_id, "sg_01REFUND");
  e.on_answer(s, {0, 0, false}, rejected("refund_exceeds_original"), t0);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "refund_exceeds_original");
}

answer gave(std::int64_t amount) {
  answer a = ok();
  a.amount = amount;
  return a;
}

TEST(Refund, WhatARefundGaveBackIsItsShardsAnswer) {
  auto e = engine_for("refund");
  auto s = one_account("sg_01REFUND", "erin", 0);  // what is left
  s.input.original_type = "capture";
  s.input.original_key = "sg_01ORIGINAL";
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].amount, 0);
  EXPECT_TRUE(refunded_by(s, *find_workflow("refund")).empty());
  e.on_answer(s, {0, 0, false}, gave(6), t0 + 1ms);
  EXPECT_EQ(s.state, saga_state::completed);
  EXPECT_EQ(refunded_by(s, *find_workflow("refund")), (std::vector<saga_item>{{"erin", 6}}));

  // A cancel_key at the deadline that finds the refund applied learns its amount.
  auto late = one_account("sg_01REFUND2", "erin", 4);
  e.start(late, t0);
  d = e.on_wake(late, t0 + 10s);
  ASSERT_EQ(d.send.size(), 1u);
  answer applied{answer_kind::already_applied_succeeded, ""};
  applied.amount = 4;
  e.on_answer(late, {0, 0, true}, applied, t0 + 10s);
  EXPECT_EQ(late.state, saga_state::completed);
  EXPECT_EQ(refunded_by(late, *find_workflow("refund")), (std::vector<saga_item>{{"erin", 4}}));
}

TEST(RevokeItems, RefundsWhatIsLeftOfEveryItemForwardOnly) {
  const auto& w = *find_workflow("revoke_items");
  auto e = engine_for("revoke_items");
  auto s = batch(3);
  for (auto& i : s.input.items) i.amount = 0;
  s.input.original_type = "capture";
  s.input.original_key = "sg_01ORIGINAL";
  auto d = e.start(s, t0);
  ASSERT_EQ(d.send.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.send[i].op, participant_op::refund);
    EXPECT_EQ(d.send[i].account, "student-" + std::to_string(i));
    EXPECT_EQ(d.send[i].amount, 0);
    EXPECT_EQ(d.send[i].original_id, "sg_01ORIGINAL");
  }
  EXPECT_TRUE(e.past_pivot(s));  // a refund once sent is not taken back
  e.on_answer(s, {0, 0, false}, gave(1), t0 + 1ms);
  e.on_answer(s, {0, 2, false}, gave(0), t0 + 1ms);  // nothing was left of it
  // A frozen account is waited for, never compensated.
  d = e.on_answer(s, {0, 1, false}, {answer_kind::retry, "account_frozen"}, t0 + 2ms);
  EXPECT_EQ(s.state, saga_state::running);
  EXPECT_TRUE(d.send.empty());
  d = e.on_wake(s, t0 + 1s);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].account, "student-1");
  e.on_answer(s, {0, 1, false}, gave(1), t0 + 1s);
  EXPECT_EQ(s.state, saga_state::completed);
  EXPECT_EQ(refunded_by(s, w), (std::vector<saga_item>{{"student-0", 1}, {"student-1", 1}, {"student-2", 0}}));

  // A refused item cannot be compensated: an operator looks at it.
  auto r = first_answered(e, batch(2), gave(1), t0 + 1ms);
  e.on_answer(r, {0, 1, false}, rejected("account_closed"), t0 + 1ms);
  EXPECT_EQ(r.state, saga_state::needs_attention);
  EXPECT_NE(r.attention.find("account_closed"), std::string::npos);
  EXPECT_EQ(refunded_by(r, w), (std::vector<saga_item>{{"student-0", 1}}));
}

TEST(Workflows, WhichStepsMaySkipTheWriteAhead) {
  for (const auto& w : workflows()) {
    EXPECT_FALSE(w.sendable_before_saving(0)) << w.name;  // goes out with the saga's creation
    EXPECT_FALSE(w.sendable_before_saving(w.steps.size())) << w.name;
  }
  EXPECT_TRUE(find_workflow("transfer")->sendable_before_saving(1));  // the pivot: a cancel_key fences it off
  EXPECT_TRUE(find_workflow("transfer")->sendable_before_saving(2));  // capture after the pivot
  EXPECT_TRUE(find_workflow("refund_transfer")->sendable_before_saving(1));
  EXPECT_TRUE(find_workflow("refund_transfer")->sendable_before_saving(2));
  // A pivot that cannot be undone could not be fenced off by a recovery
  // that compensates: it waits for the write-ahead.
  EXPECT_FALSE(find_workflow("batch_deduct")->sendable_before_saving(1));
  // The capture of a held deduction follows the app's confirm.
  EXPECT_FALSE(find_workflow("deduct_held")->sendable_before_saving(1));
}

// A transfer as its creation was written: the hold in flight. The instance
// that wrote it may have sent the credit since, unrecorded.
saga transfer_as_created(const engine& e) {
  auto s = transfer_saga();
  e.start(s, t0);
  return s;
}

TEST(Transfer, RecoveredBeforeItsDeadlineItResendsTheHoldAndThenTheCreditWithTheSameKeys) {
  auto e = engine_for("transfer");
  auto s = transfer_as_created(e);
  auto d = e.recover(s, t0 + 100ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].ref, (call_ref{0, 0, false}));
  EXPECT_EQ(s.calls[1][0].forward.status, call_status::waiting);  // its fate unknown
  d = e.on_answer(s, {0, 0, false}, ok(), t0 + 105ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].ref, (call_ref{1, 0, false}));
  EXPECT_EQ(d.send[0].biz_id, "sg_01TRANSFER");
  d = e.on_answer(s, {1, 0, false}, ok(), t0 + 110ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
  e.on_answer(s, {2, 0, false}, ok(), t0 + 115ms);
  EXPECT_EQ(s.state, saga_state::completed);
}

TEST(Transfer, RecoveredPastItsDeadlineItCancelsTheCreditsKeyBeforeReleasingTheHold) {
  auto e = engine_for("transfer");
  auto s = transfer_as_created(e);
  auto d = e.recover(s, t0 + 11s);  // the deadline was t0 + 10 s
  EXPECT_EQ(s.state, saga_state::compensating);
  EXPECT_EQ(s.error->code, "deadline_exceeded");
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::cancel_key);
  EXPECT_EQ(d.send[0].target_type, "credit");
  EXPECT_EQ(d.send[0].target_id, "sg_01TRANSFER");
  // The key was never used: tombstoned; then the hold is released.
  d = e.on_answer(s, {1, 0, true}, {answer_kind::cancelled, ""}, t0 + 11s + 5ms);
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::release);
  e.on_answer(s, {0, 0, true}, ok(), t0 + 11s + 10ms);
  EXPECT_EQ(s.state, saga_state::failed);
  EXPECT_EQ(s.error->code, "deadline_exceeded");
}

TEST(Transfer, RecoveredPastItsDeadlineItFinishesWhenTheUnrecordedCreditHadApplied) {
  auto e = engine_for("transfer");
  auto s = transfer_as_created(e);
  e.recover(s, t0 + 11s);
  auto d = e.on_answer(s, {1, 0, true}, {answer_kind::already_applied_succeeded, ""}, t0 + 11s + 5ms);
  EXPECT_EQ(s.state, saga_state::running);  // past the pivot after all
  ASSERT_EQ(d.send.size(), 1u);
  EXPECT_EQ(d.send[0].op, participant_op::capture);
  e.on_answer(s, {2, 0, false}, ok(), t0 + 11s + 10ms);
  EXPECT_EQ(s.state, saga_state::completed);
}

TEST(BatchDeduct, RecoveryMarksNoLaterStepWhenItsPivotCannotBeUndone) {
  auto e = engine_for("batch_deduct");
  auto s = batch(2);
  e.start(s, t0);
  e.recover(s, t0 + 100ms);
  for (const auto& c : s.calls[1]) EXPECT_EQ(c.forward.status, call_status::idle);
}

TEST(Workflows, EachHasOnePivotAndOnlyForwardStepsAfterIt) {
  ASSERT_FALSE(workflows().empty());
  for (const auto& w : workflows()) {
    int pivots = 0;
    for (const auto& st : w.steps) pivots += st.pivot ? 1 : 0;
    EXPECT_EQ(pivots, 1) << w.name;
    for (std::size_t i = w.pivot_index() + 1; i < w.steps.size(); ++i)
      EXPECT_EQ(w.steps[i].undo, undo_kind::none) << w.name << " " << w.steps[i].name;
    nlohmann::json j = w;
    EXPECT_EQ(j["name"], w.name);
    EXPECT_EQ(j["steps"].size(), w.steps.size());
  }
  EXPECT_EQ(find_workflow("nope"), nullptr);
  EXPECT_EQ(saga_type_from("batch_deduct"), saga_type::batch_deduct);
  EXPECT_EQ(saga_state_from(to_string(saga_state::needs_attention)), saga_state::needs_attention);
}

}  // namespace
}  // namespace tally::orch
