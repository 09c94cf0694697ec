// The coalescer on an io_context alone: batching with the load, max_batch,
// keyed batches, submitting several items at once, the queue-wait hook, a
// deferred start, draining and destruction.
#include "common/batching/coalescer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
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

using string_coalescer = coalescer<std::string, std::string>;

string_coalescer::options keyed(std::size_t workers, std::size_t max_batch) {
  return {workers, max_batch, recorder::key_of, {}, {}};
}

// What every test arranges: an io_context, a recorder to flush to, and the
// answers its callers got.
class Coalescer : public testing::Test {
 protected:
  // A coalescer over `rec`'s flush: `config` is workers and max batch, or options.
  template <class... Config>
  string_coalescer make(Config... config) {
    return string_coalescer(io.get_executor(), config..., rec.flush(io), "closed");
  }

  // Submits each item, one caller each, and keeps its answer in `answers`.
  void submit(string_coalescer& c, std::initializer_list<const char*> submitted) {
    for (std::string item : submitted) {
      auto caller = [this, &c, item]() -> asio::awaitable<void> { answers[item] = co_await c.async_submit(item); };
      asio::co_spawn(io, caller, asio::detached);
    }
  }

  // Runs `io` until `done()` or a few seconds have passed: idle workers wait
  // on timers, so the io_context never runs out of work by itself.
  template <class Done>
  void run_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
  }

  void run_until_answered(std::size_t count) {
    run_until([&] { return answers.size() == count; });
  }

  asio::io_context io;
  recorder rec;
  std::map<std::string, std::string> answers;
};

TEST_F(Coalescer, ConcurrentSubmitsShareOneFlush) {
  auto c = make(1, 100);
  submit(c, {"a:1", "b:1", "c:1"});
  run_until_answered(3);
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1", "b:1", "c:1"}}));
  EXPECT_EQ(answers["b:1"], "b:1@0");
  EXPECT_EQ(c.flushes(), 1u);
}

TEST_F(Coalescer, BatchesStopAtMaxBatch) {
  auto c = make(1, 2);
  submit(c, {"a:1", "b:1", "c:1", "d:1", "e:1"});
  run_until_answered(5);
  EXPECT_EQ(rec.batch_sizes(), (sizes{2, 2, 1}));
  EXPECT_EQ(answers["e:1"], "e:1@2");
}

TEST_F(Coalescer, KeyedBatchesInFlightNeverShareAKey) {
  rec.flush_time = 20ms;
  auto c = make(keyed(2, 1));
  c.start();
  submit(c, {"a:1", "a:2", "b:1"});
  run_until_answered(3);
  EXPECT_FALSE(rec.keys_overlapped);
  // b:1 overtakes a:2, which waits for a:1's flush: the two workers run a:1 and b:1 together.
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1"}, {"b:1"}, {"a:2"}}));
  auto at = [&](const std::string& e) { return std::find(rec.events.begin(), rec.events.end(), e); };
  EXPECT_LT(at("start b:1"), at("end a:1"));
  EXPECT_LT(at("end a:1"), at("start a:2"));
  EXPECT_EQ(answers.size(), 3u);
}

TEST_F(Coalescer, KeyedBatchTakesAKeysLaterItemsWithItsFirst) {
  auto c = make(keyed(1, 10));
  c.start();
  submit(c, {"a:1", "b:1", "a:2"});
  run_until_answered(3);
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1", "b:1", "a:2"}}));
}

TEST_F(Coalescer, SubmitManyAnswersEachItemInOrder) {
  rec.flush_time = 10ms;
  auto c = make(keyed(2, 2));
  c.start();
  std::optional<items> many;
  auto caller = [&]() -> asio::awaitable<void> {
    items batch{"a:1", "b:1", "a:2"};
    many = co_await c.async_submit_many(std::move(batch));
  };
  asio::co_spawn(io, caller, asio::detached);
  run_until([&] { return many.has_value(); });
  ASSERT_TRUE(many);
  // a:2 does not fit in a:1's batch and waits for it: the idle second worker must not run it beside a:1.
  EXPECT_EQ(*many, (items{"a:1@0", "b:1@0", "a:2@1"}));
  EXPECT_FALSE(rec.keys_overlapped);
}

TEST_F(Coalescer, SubmitManyOfNothingAnswersAtOnce) {
  auto c = make(1, 10);
  std::optional<items> many;
  auto caller = [&]() -> asio::awaitable<void> {
    items none;
    many = co_await c.async_submit_many(std::move(none));
  };
  asio::co_spawn(io, caller, asio::detached);
  run_until([&] { return many.has_value(); });
  ASSERT_TRUE(many);
  EXPECT_TRUE(many->empty());
  EXPECT_EQ(c.flushes(), 0u);
}

TEST_F(Coalescer, ReportsEachItemsWaitInTheQueue) {
  rec.flush_time = 20ms;
  std::vector<std::chrono::steady_clock::duration> waits;
  string_coalescer::options o{1, 1, {}, [&](const auto& w) { waits.push_back(w.waited); }, {}};
  auto c = make(o);
  c.start();
  submit(c, {"a:1", "b:1"});
  run_until_answered(2);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_GE(waits[1], 20ms);  // behind a:1's flush
  EXPECT_LT(waits[0], waits[1]);
}

TEST_F(Coalescer, SaysWhatIsQueuedPerKeyAndSinceWhenARunningBatchHoldsIt) {
  rec.flush_time = 30ms;
  auto c = make(keyed(1, 1));
  c.start();
  submit(c, {"a:1", "a:2", "a:3", "b:1"});
  run_until([&] { return rec.flushed.size() == 1; });  // a:1 is being flushed
  const auto a = c.key_state("a");
  EXPECT_EQ(a.queued, 2u);
  ASSERT_TRUE(a.held_since.has_value());
  EXPECT_LE(*a.held_since, std::chrono::steady_clock::now());
  EXPECT_EQ(c.key_state("b").queued, 1u);
  EXPECT_FALSE(c.key_state("b").held_since.has_value());
  EXPECT_EQ(c.key_state("c").queued, 0u);
  EXPECT_EQ(c.queued_by_key(), (std::unordered_map<std::string, std::size_t>{{"a", 2}, {"b", 1}}));
  run_until_answered(4);
  EXPECT_TRUE(c.queued_by_key().empty());
  EXPECT_FALSE(c.key_state("a").held_since.has_value());
}

TEST_F(Coalescer, RefusesAtStartWhatTheHookRefusesAndFlushesTheRest) {
  rec.flush_time = 30ms;
  std::vector<bool> behind;
  auto o = keyed(1, 10);
  o.refuse_at_start = [&](const auto& w) -> std::optional<std::string> {
    behind.push_back(w.behind_key);
    if (w.behind_key && w.waited >= 20ms) return "refused";
    return std::nullopt;
  };
  auto c = make(o);
  c.start();
  submit(c, {"a:1"});
  run_until([&] { return rec.flushed.size() == 1; });  // a:1 runs for 30 ms
  submit(c, {"a:2", "b:1"});
  run_until_answered(3);
  // a:2 queued behind its key's running batch and waited over 20 ms: refused, never flushed. b:1 waited as
  // long, but for the worker, not behind its key: flushed.
  EXPECT_EQ(answers["a:2"], "refused");
  EXPECT_EQ(answers["b:1"], "b:1@1");
  EXPECT_EQ(rec.flushed, (std::vector<items>{{"a:1"}, {"b:1"}}));
  EXPECT_EQ(behind, (std::vector<bool>{false, true, false}));
  // A batch of refused items only: nothing flushed, the key free again.
  submit(c, {"c:1"});
  run_until([&] { return rec.flushed.size() == 3; });
  submit(c, {"c:2", "c:3"});
  run_until_answered(6);
  EXPECT_EQ(answers["c:2"], "refused");
  EXPECT_EQ(answers["c:3"], "refused");
  submit(c, {"c:4"});
  run_until_answered(7);
  EXPECT_EQ(answers["c:4"], "c:4@3");
}

TEST_F(Coalescer, WorkersWaitForStart) {
  auto c = make(keyed(1, 10));
  submit(c, {"a:1"});
  io.poll();
  EXPECT_EQ(c.flushes(), 0u);
  EXPECT_EQ(c.queued(), 1u);
  EXPECT_TRUE(answers.empty());
  c.start();
  run_until_answered(1);
  EXPECT_EQ(answers["a:1"], "a:1@0");
  EXPECT_EQ(c.queued(), 0u);
}

TEST_F(Coalescer, DrainFlushesWhatIsQueuedAndRefusesTheRest) {
  rec.flush_time = 10ms;
  auto c = make(keyed(2, 1));
  c.start();
  submit(c, {"a:1", "a:2", "a:3"});
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
  run_until([&] { return late_many.has_value(); });
  EXPECT_TRUE(drained);
  EXPECT_EQ(answers["a:3"], "a:3@2");  // drained in order, behind one another
  EXPECT_EQ(late, "closed");
  EXPECT_EQ(late_many, (items{"closed", "closed"}));
  EXPECT_EQ(c.flushes(), 3u);
}

TEST_F(Coalescer, DestructionAnswersWaitingCallersClosed) {
  auto c = std::make_unique<string_coalescer>(io.get_executor(), keyed(1, 10), rec.flush(io), "closed");
  submit(*c, {"a:1"});
  io.poll();  // queued, never started
  c.reset();
  io.run();
  EXPECT_EQ(answers["a:1"], "closed");
}

}  // namespace
}  // namespace tally::batching
