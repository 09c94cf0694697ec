#include "orchestrator/service/remote_actions.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "orchestrator/service/saga_driver.hpp"

namespace tally::orch {

namespace asio = boost::asio;

std::optional<std::int64_t> settled_action_id(std::string_view payload) {
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), id);
  if (ec != std::errc() || end != payload.data() + payload.size() || id <= 0) return std::nullopt;
  return id;
}

remote_actions::remote_actions(asio::any_io_executor ex, saga_store& store, std::chrono::milliseconds recheck)
    : ex_(ex), store_(store), recheck_(recheck) {}

void remote_actions::ring(waiter& w) {
  w.rung = true;
  w.bell->cancel();
}

void remote_actions::settled(std::string_view payload) {
  auto id = settled_action_id(payload);
  if (!id) return;
  if (auto it = waiting_.find(*id); it != waiting_.end()) ring(it->second);
}

void remote_actions::recheck_all() {
  for (auto& [id, w] : waiting_) ring(w);
}

asio::awaitable<remote_actions::outcome> remote_actions::async_request(std::string saga_id, saga_action action,
                                                                       std::chrono::milliseconds timeout) {
  outcome out;
  std::int64_t id = 0;
  if ((out.error = co_await store_.async_request_action(std::move(saga_id), action, wall_clock(), id))) co_return out;
  const auto until = std::chrono::steady_clock::now() + timeout;
  asio::steady_timer bell(ex_);
  waiting_[id] = waiter{&bell, false};
  // Read at once: the notification may have come before this waiter was registered.
  for (;;) {
    std::optional<engine::request_result> result;
    if (!co_await store_.async_action_result(id, result) && result) {
      out.result = result;
      break;
    }
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    // Rung while the result was being read (that read may predate the
    // holder's commit): read again rather than wait for the next recheck.
    if (std::exchange(waiting_[id].rung, false)) continue;
    bell.expires_after(std::min<std::chrono::steady_clock::duration>(left, recheck_));
    boost::system::error_code ec;
    co_await bell.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  waiting_.erase(id);
  co_return out;
}

}  // namespace tally::orch
