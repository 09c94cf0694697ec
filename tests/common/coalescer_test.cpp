// The coalescer on an io_context alone: batching with the load, max_batch,
// keyed batches, submitting several items at once, the queue-wait hook, a
// deferred start, draining and destruction.
#include "common/batching/coalescer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tally::batching {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// An item is "key:n"; its result is the item with the index of the flush that carried it.
using items = std::vector<std::string>;
using sizes = std::vector<std::size_t>;

struct recorder {
  std::vector<items> flushed;          // each flush's items, in flush order
  std::vector<std::string> events;     // "start key:n" and "end key:n"
  std::set<std::string> running_keys;  // of the flushes in progress
  bool keys_overlapped = false;        // two running flushes shared a key
  std::chrono::milliseconds flush_time = 0ms;

  static std::string key_of(const std::string& item) { return item.substr(0, item.find(':')); }

  coalescer<std::string, std::string>::flush_fn flush(asio::io_context& io) {
    return [this, &io](std::size_t, items& batch, items& results) -> asio::awaitable<void> {
      const auto index = flushed.size();
      flushed.push_back(batch);
      std::set<std::string> mine;
      for (const auto& i : batch) {
        events.push_back("start " + i);
        mine.insert(key_of(i));
      }
      for (const auto& k : mine) keys_overlapped = keys_overlapped || !running_keys.insert(k).second;
      if (flush_time > 0ms) {
        asio::steady_timer t(io, flush_time);
        co_await t.async_wait(asio::use_awaitable);
      }
      for (const auto& k : mine) running_keys.erase(k);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        events.push_back("end " + batch[i]);
        results[i] = batch[i] + "@" + std::to_string(index);
      }
    };
  }

  sizes batch_sizes() const {
    sizes out;
    for (const auto& b : flushed) out.push_back(b.size());
    return out;
  }
};

// Submits `item` and keeps the answer in `out`.
void submit(asio::io_context& io, coalescer<std::string, std::string>& c, std::string item,
            std::map<std::string, std::string>& out) {
  auto caller = [&c, &out, item]() -> asio::awaitable<void> { out[item] = co_await c.async_submit(item); };
  asio::co_spawn(io, caller, asio::detached);
}

// Runs `io` until `done()` or a few seconds have passed: idle workers wait
// on timers, so the io_context never runs out of work by itself.
template <class Done>
void run_until(asio::io_context& io, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
}

coalescer<std::string, std::string>::options keyed(std::size_t workers, std::size_t max_batch) {
  return {workers, max_batch, recorder::key_of, {}, {}};
}

TEST(Coalescer, ConcurrentSubmitsShareOneFlush) {
  asio::io_context io;
  recorder rec;
  coalescer<std::string, std::string> c(io.get_executor(), 1, 100, rec.flush(io), "closed");
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "b:1", "c:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 3; });
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1", "b:1", "c:1"}}));
  EXPECT_EQ(answers["b:1"], "b:1@0");
  EXPECT_EQ(c.flushes(), 1u);
}

TEST(Coalescer, BatchesStopAtMaxBatch) {
  asio::io_context io;
  recorder rec;
  coalescer<std::string, std::string> c(io.get_executor(), 1, 2, rec.flush(io), "closed");
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "b:1", "c:1", "d:1", "e:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 5; });
  EXPECT_EQ(rec.batch_sizes(), (sizes{2, 2, 1}));
  EXPECT_EQ(answers["e:1"], "e:1@2");
}

TEST(Coalescer, KeyedBatchesInFlightNeverShareAKey) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 20ms;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(2, 1), rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "a:2", "b:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 3; });
  EXPECT_FALSE(rec.keys_overlapped);
  // b:1 overtakes a:2, which waits for a:1's flush: the two workers run a:1 and b:1 together.
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1"}, {"b:1"}, {"a:2"}}));
  auto at = [&](const std::string& e) { return std::find(rec.events.begin(), rec.events.end(), e); };
  EXPECT_LT(at("start b:1"), at("end a:1"));
  EXPECT_LT(at("end a:1"), at("start a:2"));
  EXPECT_EQ(answers.size(), 3u);
}

TEST(Coalescer, KeyedBatchTakesAKeysLaterItemsWithItsFirst) {
  asio::io_context io;
  recorder rec;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(1, 10), rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "b:1", "a:2"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 3; });
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1", "b:1", "a:2"}}));
}

TEST(Coalescer, SubmitManyAnswersEachItemInOrder) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 10ms;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(2, 2), rec.flush(io), "closed");
  c.start();
  std::optional<items> answers;
  auto caller = [&]() -> asio::awaitable<void> {
    items batch{"a:1", "b:1", "a:2"};
    answers = co_await c.async_submit_many(std::move(batch));
  };
  asio::co_spawn(io, caller, asio::detached);
  run_until(io, [&] { return answers.has_value(); });
  ASSERT_TRUE(answers);
  // a:2 does not fit in a:1's batch and waits for it: the idle second worker must not run it beside a:1.
  EXPECT_EQ(*answers, (items{"a:1@0", "b:1@0", "a:2@1"}));
  EXPECT_FALSE(rec.keys_overlapped);
}

TEST(Coalescer, SubmitManyOfNothingAnswersAtOnce) {
  asio::io_context io;
  recorder rec;
  coalescer<std::string, std::string> c(io.get_executor(), 1, 10, rec.flush(io), "closed");
  std::optional<items> answers;
  auto caller = [&]() -> asio::awaitable<void> {
    items none;
    answers = co_await c.async_submit_many(std::move(none));
  };
  asio::co_spawn(io, caller, asio::detached);
  run_until(io, [&] { return answers.has_value(); });
  ASSERT_TRUE(answers);
  EXPECT_TRUE(answers->empty());
  EXPECT_EQ(c.flushes(), 0u);
}

TEST(Coalescer, ReportsEachItemsWaitInTheQueue) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 20ms;
  std::vector<std::chrono::steady_clock::duration> waits;
  coalescer<std::string, std::string>::options o{1, 1, {}, [&](const auto& w) { waits.push_back(w.waited); }, {}};
  coalescer<std::string, std::string> c(io.get_executor(), o, rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "b:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 2; });
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_GE(waits[1], 20ms);  // behind a:1's flush
  EXPECT_LT(waits[0], waits[1]);
}

TEST(Coalescer, SaysWhatIsQueuedPerKeyAndSinceWhenARunningBatchHoldsIt) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 30ms;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(1, 1), rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "a:2", "a:3", "b:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return rec.flushed.size() == 1; });  // a:1 is being flushed
  const auto a = c.key_state("a");
  EXPECT_EQ(a.queued, 2u);
  ASSERT_TRUE(a.held_since.has_value());
  EXPECT_LE(*a.held_since, std::chrono::steady_clock::now());
  EXPECT_EQ(c.key_state("b").queued, 1u);
  EXPECT_FALSE(c.key_state("b").held_since.has_value());
  EXPECT_EQ(c.key_state("c").queued, 0u);
  EXPECT_EQ(c.queued_by_key(), (std::unordered_map<std::string, std::size_t>{{"a", 2}, {"b", 1}}));
  run_until(io, [&] { return answers.size() == 4; });
  EXPECT_TRUE(c.queued_by_key().empty());
  EXPECT_FALSE(c.key_state("a").held_since.has_value());
}

TEST(Coalescer, RefusesAtStartWhatTheHookRefusesAndFlushesTheRest) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 30ms;
  std::vector<bool> behind;
  auto o = keyed(1, 10);
  o.refuse_at_start = [&](const auto& w) -> std::optional<std::string> {
    behind.push_back(w.behind_key);
    if (w.behind_key && w.waited >= 20ms) return "refused";
    return std::nullopt;
  };
  coalescer<std::string, std::string> c(io.get_executor(), o, rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  submit(io, c, "a:1", answers);
  run_until(io, [&] { return rec.flushed.size() == 1; });  // a:1 runs for 30 ms
  for (const auto* i : {"a:2", "b:1"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 3; });
  // a:2 queued behind its key's running batch and waited over 20 ms: refused, never flushed. b:1 waited as
  // long, but for the worker, not behind its key: flushed.
  EXPECT_EQ(answers["a:2"], "refused");
  EXPECT_EQ(answers["b:1"], "b:1@1");
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1"}, {"b:1"}}));
  EXPECT_EQ(behind, (std::vector<bool>{false, true, false}));
  // A batch of refused items only: nothing flushed, the key free again.
  submit(io, c, "c:1", answers);
  run_until(io, [&] { return rec.flushed.size() == 3; });
  for (const auto* i : {"c:2", "c:3"}) submit(io, c, i, answers);
  run_until(io, [&] { return answers.size() == 6; });
  EXPECT_EQ(answers["c:2"], "refused");
  EXPECT_EQ(answers["c:3"], "refused");
  submit(io, c, "c:4", answers);
  run_until(io, [&] { return answers.size() == 7; });
  EXPECT_EQ(answers["c:4"], "c:4@3");
}

TEST(Coalescer, WorkersWaitForStart) {
  asio::io_context io;
  recorder rec;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(1, 10), rec.flush(io), "closed");
  std::map<std::string, std::string> answers;
  submit(io, c, "a:1", answers);
  io.poll();
  EXPECT_EQ(c.flushes(), 0u);
  EXPECT_EQ(c.queued(), 1u);
  EXPECT_TRUE(answers.empty());
  c.start();
  run_until(io, [&] { return answers.size() == 1; });
  EXPECT_EQ(answers["a:1"], "a:1@0");
  EXPECT_EQ(c.queued(), 0u);
}

TEST(Coalescer, DrainFlushesWhatIsQueuedAndRefusesTheRest) {
  asio::io_context io;
  recorder rec;
  rec.flush_time = 10ms;
  coalescer<std::string, std::string> c(io.get_executor(), keyed(2, 1), rec.flush(io), "closed");
  c.start();
  std::map<std::string, std::string> answers;
  for (const auto* i : {"a:1", "a:2", "a:3"}) submit(io, c, i, answers);
  bool drained = false;
  std::optional<std::string> late;
  std::optional<items> late_many;
  auto drain = [&]() -> asio::awaitable<void> {
    co_await c.async_drain();
    drained = true;
    std::string one = "b:1";
    late = co_await c.async_submit(std::move(one));
    items more{"b:2", "b:3"};
    late_many = co_await c.async_submit_many(std::move(more));
  };
  io.poll();  // the submits are queued and a:1 is flushing
  asio::co_spawn(io, drain, asio::detached);
  run_until(io, [&] { return late_many.has_value(); });
  EXPECT_TRUE(drained);
  EXPECT_EQ(answers["a:3"], "a:3@2");  // drained in order, behind one another
  EXPECT_EQ(late, "closed");
  EXPECT_EQ(late_many, (items{"closed", "closed"}));
  EXPECT_EQ(c.flushes(), 3u);
}

TEST(Coalescer, DestructionAnswersWaitingCallersClosed) {
  asio::io_context io;
  recorder rec;
  auto c =
      std::make_unique<coalescer<std::string, std::string>>(io.get_executor(), keyed(1, 10), rec.flush(io), "closed");
  std::map<std::string, std::string> answers;
  submit(io, *c, "a:1", answers);
  io.poll();  // queued, never started
  c.reset();
  io.run();
  EXPECT_EQ(answers["a:1"], "closed");
}

}  // namespace
}  // namespace tally::batching
