#pragma once
// Coalesces concurrent requests into batches: callers submit one item (or
// several at once) and wait for its result; a fixed number of workers take
// whatever has queued up (at most max_batch items) and flush it as one unit
// — one HTTP request, one database transaction. While every worker is busy
// the queue grows, so batches grow with the load and shrink to one item
// when idle.
//
// Optionally keyed: batches in flight at the same time then never share a
// key (batch_pick.hpp). An item whose key a running batch holds stays
// queued, ahead of later items with that key, until that batch is done;
// so each key's items are flushed in arrival order and concurrent flushes
// never contend for the same thing (the shard's accounts).
//
// Keyed, it also says what is queued per key and since when a running
// batch holds a key (the shard's hot-account admission reads it), and may
// refuse an item when its batch starts instead of flushing it.
//
// For use on one io_context thread. Destroying the coalescer answers every
// waiting caller with the `closed` result; workers still flushing stop
// without touching it. async_drain() is the orderly end: new items are
// answered `closed`, the queued ones are flushed.
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/batching/batch_pick.hpp"

namespace tally::batching {

template <class Item, class Result>
class coalescer {
 public:
  // Flushes `items` and fills `results` (same size, pre-sized) in order.
  // `worker` is the worker's index, for per-worker resources (a connection).
  using flush_fn = std::function<boost::asio::awaitable<void>(std::size_t worker, std::vector<Item>& items,
                                                              std::vector<Result>& results)>;

  using clock = std::chrono::steady_clock;

  // How long an item waited in the queue when its batch started, and
  // whether it arrived behind its key (items with its key were queued, or
  // a running batch held it).
  struct wait_info {
    clock::duration waited{};
    bool behind_key = false;
  };

  struct options {
    std::size_t workers = 1;
    std::size_t max_batch = 1;
    // An item's key; none: any items may share a batch and run concurrently.
    std::function<std::string(const Item&)> key;
    // Told, when a batch starts, how long each of its items waited.
    std::function<void(const wait_info&)> on_wait;
    // Asked, when a batch starts, for each of its items: a result answers
    // the item at once and leaves it out of the flush.
    std::function<std::optional<Result>(const wait_info&)> refuse_at_start;
  };

  // One key now: its items queued, and since when a running batch holds it.
  struct key_view {
    std::size_t queued = 0;
    std::optional<clock::time_point> held_since;
  };

  // Starts the workers at once.
  coalescer(boost::asio::any_io_executor ex, std::size_t workers, std::size_t max_batch, flush_fn flush, Result closed)
      : coalescer(ex, options{workers, max_batch, {}, {}, {}}, std::move(flush), std::move(closed)) {
    start();
  }

  // Starts the workers at start(): for a flush that needs what is known
  // only later (the shard's writer epoch). Items submitted before wait.
  coalescer(boost::asio::any_io_executor ex, options o, flush_fn flush, Result closed)
      : ex_(ex),
        options_(std::move(o)),
        flush_(std::move(flush)),
        closed_(std::move(closed)),
        drained_(ex, boost::asio::steady_timer::time_point::max()) {}

  ~coalescer() {
    *alive_ = false;
    for (auto* p : queue_) finish(p, closed_);
    for (auto* p : in_flight_) finish(p, closed_);
    queue_.clear();
    in_flight_.clear();
    while (!idle_.empty()) wake_worker();
  }
  coalescer(const coalescer&) = delete;
  coalescer& operator=(const coalescer&) = delete;

  // Once.
  void start() {
    for (std::size_t i = 0; i < options_.workers; ++i) {
      ++running_;
      auto worker = [this, alive = alive_, i]() -> boost::asio::awaitable<void> {
        if (*alive) co_await run_worker(i);
      };
      boost::asio::co_spawn(ex_, worker, boost::asio::detached);
    }
  }

  boost::asio::awaitable<Result> async_submit(Item item) {
    if (draining_) co_return closed_;
    boost::asio::steady_timer done(ex_, boost::asio::steady_timer::time_point::max());
    pending p = make_pending(std::move(item), done, std::chrono::steady_clock::now());
    enqueue(&p, &p + 1);
    boost::system::error_code ec;
    while (!p.finished) co_await done.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    co_return std::move(p.result);
  }

  // Queues every item at once (they may share batches); one result each, in order.
  boost::asio::awaitable<std::vector<Result>> async_submit_many(std::vector<Item> items) {
    std::vector<Result> results;
    if (draining_) {
      results.assign(items.size(), closed_);
      co_return results;
    }
    boost::asio::steady_timer done(ex_, boost::asio::steady_timer::time_point::max());
    std::vector<pending> ps;
    ps.reserve(items.size());
    const auto queued = std::chrono::steady_clock::now();
    for (auto& item : items) ps.push_back(make_pending(std::move(item), done, queued));
    enqueue(ps.data(), ps.data() + ps.size());
    boost::system::error_code ec;
    for (auto& p : ps)
      while (!p.finished) co_await done.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    results.reserve(ps.size());
    for (auto& p : ps) results.push_back(std::move(p.result));
    co_return results;
  }

  // Refuses new items, lets the queued ones be flushed, and returns when
  // every worker has stopped.
  boost::asio::awaitable<void> async_drain() {
    draining_ = true;
    while (!idle_.empty()) wake_worker();
    boost::system::error_code ec;
    while (running_ > 0) {
      drained_.expires_at(boost::asio::steady_timer::time_point::max());
      co_await drained_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    }
  }

  std::size_t queued() const { return queue_.size(); }
  std::size_t flushes() const { return flushes_; }
  key_view key_state(const std::string& key) const {
    key_view v;
    if (auto q = queued_by_key_.find(key); q != queued_by_key_.end()) v.queued = q->second;
    if (auto h = held_since_.find(key); h != held_since_.end()) v.held_since = h->second;
    return v;
  }
  // Every key with items queued, and how many.
  const std::unordered_map<std::string, std::size_t>& queued_by_key() const { return queued_by_key_; }

 private:
  struct pending {
    Item item;
    std::string key;
    Result result;
    boost::asio::steady_timer* done = nullptr;
    bool finished = false;
    std::chrono::steady_clock::time_point queued;
    bool behind_key = false;
  };

  pending make_pending(Item item, boost::asio::steady_timer& done, std::chrono::steady_clock::time_point queued) {
    std::string key = options_.key ? options_.key(item) : std::string();
    return pending{std::move(item), std::move(key), Result{}, &done, false, queued};
  }

  static void finish(pending* p, Result r) {
    p->result = std::move(r);
    p->finished = true;
    p->done->cancel();
  }

  // Items that all wait for a running batch are taken when it ends: no
  // worker is woken for them.
  void enqueue(pending* first, pending* last) {
    bool takeable = !options_.key;
    for (auto* p = first; p != last; ++p) {
      queue_.push_back(p);
      const bool held = in_flight_keys_.contains(p->key);
      takeable = takeable || !held;
      if (!options_.key) continue;
      auto& queued = queued_by_key_[p->key];
      p->behind_key = held || queued > 0;
      ++queued;
    }
    if (takeable) wake_worker();
  }

  // Waking one worker rather than all keeps a pool of many workers from
  // stampeding on every submit.
  void wake_worker() {
    if (idle_.empty()) return;
    idle_.front()->cancel();
    idle_.pop_front();
  }

  // Moves the next batch from the queue into `batch`, claiming its keys.
  batch_pick take_batch(std::vector<pending*>& batch) {
    batch.clear();
    batch_pick pick;
    if (!options_.key) {
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      pick.eligible_left = !queue_.empty();
      return pick;
    }
    std::vector<std::string> keys;
    keys.reserve(queue_.size());
    for (const auto* p : queue_) keys.push_back(p->key);
    pick = pick_batch(keys, in_flight_keys_, options_.max_batch);
    std::deque<pending*> left;
    std::size_t next = 0;  // into pick.taken
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (next < pick.taken.size() && pick.taken[next] == i) {
        batch.push_back(queue_[i]);
        if (auto q = queued_by_key_.find(queue_[i]->key); q != queued_by_key_.end() && --q->second == 0)
          queued_by_key_.erase(q);
        ++next;
      } else {
        left.push_back(queue_[i]);
      }
    }
    queue_ = std::move(left);
    in_flight_keys_.insert(pick.claimed.begin(), pick.claimed.end());
    const auto now = clock::now();
    for (const auto& key : pick.claimed) held_since_[key] = now;
    return pick;
  }

  boost::asio::awaitable<void> run_worker(std::size_t index) {
    auto alive = alive_;
    std::vector<pending*> batch;
    std::vector<Item> items;
    std::vector<Result> results;
    for (;;) {
      auto pick = take_batch(batch);
      if (batch.empty()) {
        if (draining_ && queue_.empty()) {
          // The others may be idle behind keys this worker held.
          while (!idle_.empty()) wake_worker();
          if (--running_ == 0) drained_.cancel();
          co_return;
        }
        boost::asio::steady_timer idle(ex_, boost::asio::steady_timer::time_point::max());
        idle_.push_back(&idle);
        boost::system::error_code ec;
        co_await idle.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        if (!*alive) co_return;    // the coalescer (and its members) may be gone
        std::erase(idle_, &idle);  // a no-op when a waker already took it off
        continue;
      }
      // More than one batch's worth is ready: another idle worker takes it now.
      if (pick.eligible_left) wake_worker();
      const auto started = std::chrono::steady_clock::now();
      items.clear();
      std::size_t kept = 0;
      for (auto* p : batch) {
        const wait_info w{started - p->queued, p->behind_key};
        if (options_.on_wait) options_.on_wait(w);
        if (options_.refuse_at_start) {
          if (auto refused = options_.refuse_at_start(w)) {
            finish(p, std::move(*refused));
            continue;
          }
        }
        batch[kept++] = p;
        in_flight_.insert(p);
        items.push_back(std::move(p->item));
      }
      batch.resize(kept);
      if (!batch.empty()) {
        results.assign(batch.size(), Result{});
        ++flushes_;
        co_await flush_(index, items, results);
        if (!*alive) co_return;
        for (std::size_t i = 0; i < batch.size(); ++i) {
          if (in_flight_.erase(batch[i]) == 1) finish(batch[i], std::move(results[i]));
        }
      }
      for (const auto& key : pick.claimed) {
        in_flight_keys_.erase(key);
        held_since_.erase(key);
      }
    }
  }

  boost::asio::any_io_executor ex_;
  options options_;
  flush_fn flush_;
  Result closed_;
  std::deque<pending*> queue_;
  std::unordered_set<pending*> in_flight_;                         // taken by a worker, not answered yet
  std::unordered_set<std::string> in_flight_keys_;                 // the keys of the running batches
  std::unordered_map<std::string, clock::time_point> held_since_;  // ...and when their batch started
  std::unordered_map<std::string, std::size_t> queued_by_key_;     // keyed: items queued per key
  std::deque<boost::asio::steady_timer*> idle_;                    // each waits on its own timer
  bool draining_ = false;
  std::size_t running_ = 0;  // workers started and not stopped by a drain
  boost::asio::steady_timer drained_;
  std::size_t flushes_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tally::batching
