#include "common/http/client_pool.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tally::http {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

client_pool::client_pool(asio::any_io_executor ex, std::string host, std::uint16_t port, std::size_t max_connections)
    : ex_(std::move(ex)), host_(std::move(host)), port_(port), max_(std::max<std::size_t>(1, max_connections)) {}

client_pool::~client_pool() {
  *alive_ = false;
  for (auto* w : waiters_) w->cancel();
}

asio::awaitable<client_response> client_pool::async_request(request req, std::chrono::milliseconds timeout) {
  const auto alive = alive_;
  const auto deadline = clock::now() + timeout;
  std::unique_ptr<client> c;
  while (!c) {
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
    } else if (open_ < max_) {
      c = std::make_unique<client>(ex_, host_, port_);
      ++open_;
    } else {
      asio::steady_timer wait(ex_, deadline);
      waiters_.push_back(&wait);
      auto [ec] = co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
      if (!*alive) co_return client_response{asio::error::operation_aborted, {}, false};
      std::erase(waiters_, &wait);
      if (!ec) co_return client_response{asio::error::timed_out, {}, false};  // no connection came back in time
    }
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  auto out = co_await c->async_request(std::move(req), std::max(left, std::chrono::milliseconds(1)));
  if (!*alive) co_return out;
  idle_.push_back(std::move(c));
  if (!waiters_.empty()) {
    waiters_.front()->cancel();
    waiters_.pop_front();
  }
  co_return out;
}

}  // namespace tally::http
