#pragma once
// Coalesces concurrent requests into batches: callers submit one item each
// and wait for its result; a fixed number of workers take whatever has
// queued up (at most max_batch items) and flush it as one unit — one HTTP
// request, one database transaction. While every worker is busy the queue
// grows, so batches grow with the load and shrink to one item when idle.
//
// For use on one io_context thread. Destroying the coalescer answers every
// waiting caller with the `closed` result; workers still flushing stop
// without touching it.
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
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

namespace tally::batching {

template <class Item, class Result>
class coalescer {
 public:
  // Flushes `items` and fills `results` (same size, pre-sized) in order.
  // `worker` is the worker's index, for per-worker resources (a connection).
  using flush_fn = std::function<boost::asio::awaitable<void>(std::size_t worker, std::vector<Item>& items,
                                                              std::vector<Result>& results)>;

  coalescer(boost::asio::any_io_executor ex, std::size_t workers, std::size_t max_batch, flush_fn flush, Result closed)
      : ex_(ex), max_batch_(max_batch), flush_(std::move(flush)), closed_(std::move(closed)) {
    for (std::size_t i = 0; i < workers; ++i) {
      auto worker = [this, alive = alive_, i]() -> boost::asio::awaitable<void> {
        if (*alive) co_await run_worker(i);
      };
      boost::asio::co_spawn(ex_, worker, boost::asio::detached);
    }
  }

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

  boost::asio::awaitable<Result> async_submit(Item item) {
    boost::asio::steady_timer done(ex_, boost::asio::steady_timer::time_point::max());
    pending p{std::move(item), Result{}, &done, false};
    queue_.push_back(&p);
    wake_worker();
    while (!p.finished) {
      boost::system::error_code ec;
      co_await done.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    }
    co_return std::move(p.result);
  }

  std::size_t flushes() const { return flushes_; }

 private:
  struct pending {
    Item item;
    Result result;
    boost::asio::steady_timer* done = nullptr;
    bool finished = false;
  };

  static void finish(pending* p, Result r) {
    p->result = std::move(r);
    p->finished = true;
    p->done->cancel();
  }

  void wake_worker() {
    if (idle_.empty()) return;
    idle_.front()->cancel();
    idle_.pop_front();
  }

  boost::asio::awaitable<void> run_worker(std::size_t index) {
    auto alive = alive_;
    std::vector<pending*> batch;
    std::vector<Item> items;
    std::vector<Result> results;
    while (*alive) {
      if (queue_.empty()) {
        boost::asio::steady_timer idle(ex_, boost::asio::steady_timer::time_point::max());
        idle_.push_back(&idle);
        boost::system::error_code ec;
        co_await idle.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        if (!*alive) co_return;  // the coalescer (and its members) may be gone
        std::erase(idle_, &idle);
        continue;
      }
      batch.clear();
      items.clear();
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        in_flight_.insert(queue_.front());
        items.push_back(std::move(queue_.front()->item));
        queue_.pop_front();
      }
      if (!queue_.empty()) wake_worker();
      results.assign(batch.size(), Result{});
      ++flushes_;
      co_await flush_(index, items, results);
      if (!*alive) co_return;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (in_flight_.erase(batch[i]) == 1) finish(batch[i], std::move(results[i]));
      }
    }
  }

  boost::asio::any_io_executor ex_;
  std::size_t max_batch_;
  flush_fn flush_;
  Result closed_;
  std::deque<pending*> queue_;
  std::unordered_set<pending*> in_flight_;  // taken by a worker, not answered yet
  std::deque<boost::asio::steady_timer*> idle_;
  std::size_t flushes_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tally::batching
