#include "orchestrator/service/claimer.hpp"

#include "common/log/log.hpp"
#include "orchestrator/service/saga_driver.hpp"

namespace tally::orch {

claimer::claimer(boost::asio::any_io_executor ex, saga_store& store, std::size_t batch,
                 std::chrono::milliseconds interval, take_fn take)
    : store_(store), batch_(batch), interval_(interval), take_(std::move(take)), tick_(ex), gap_(ex) {}

void claimer::wake() {
  again_ = true;
  tick_.cancel();
}

boost::asio::awaitable<void> claimer::async_run(task_group& group) {
  while (!group.stopped()) {
    again_ = false;
    gap_.expires_after(min_gap);
    auto r = co_await store_.async_claim(batch_, wall_clock());
    if (group.stopped()) break;  // what it took is given up with every other lease
    if (r.error) log::warn("claiming due sagas failed", {{"error", r.error.message}});
    const bool full = r.sagas.size() >= batch_;
    take_(std::move(r));
    if (full || again_) {
      // At most one claim per min_gap: a claim that hands an action back
      // (its saga not driven here) wakes every claimer, this one too.
      co_await group.async_wait(gap_);
      continue;
    }
    tick_.expires_after(interval_);
    co_await group.async_wait(tick_);
  }
}

}  // namespace tally::orch
