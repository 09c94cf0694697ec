#pragma once
// Claims due sagas that nobody alive holds, with the actions pending on
// every saga this instance holds (one transaction), every claim interval and
// at once when woken: an action was recorded or put back (the store's
// NOTIFY), so its saga's holder, or whoever claims it, applies it now. A full
// batch is followed by the next claim at once.
#include <chrono>
#include <cstddef>
#include <functional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "orchestrator/service/task_group.hpp"
#include "orchestrator/store/saga_store.hpp"

namespace tally::orch {

class claimer {
 public:
  using take_fn = std::function<void(saga_store::load_result)>;
  claimer(boost::asio::any_io_executor ex, saga_store& store, std::size_t batch, std::chrono::milliseconds interval,
          take_fn take);

  // Claims until `group` stops; what a claim took goes to `take`.
  boost::asio::awaitable<void> async_run(task_group& group);
  // Claims now, or once more right after the claim under way.
  void wake();

 private:
  saga_store& store_;
  std::size_t batch_;
  std::chrono::milliseconds interval_;
  take_fn take_;
  static constexpr std::chrono::milliseconds min_gap{10};
  boost::asio::steady_timer tick_;
  boost::asio::steady_timer gap_;  // not cut short by wake()
  bool again_ = false;
};

}  // namespace tally::orch
