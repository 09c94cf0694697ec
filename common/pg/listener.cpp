#include "common/pg/listener.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"

namespace tally::pg {

namespace asio = boost::asio;

listener::listener(asio::any_io_executor ex, std::string conninfo, std::vector<std::string> channels,
                   listener_handlers handlers, std::chrono::milliseconds retry)
    : conninfo_(std::move(conninfo)),
      channels_(std::move(channels)),
      handlers_(std::move(handlers)),
      retry_(retry),
      conn_(ex),
      pause_(ex) {}

void listener::stop() {
  stopped_ = true;
  pause_.cancel();
  conn_.interrupt();
}

asio::awaitable<error> listener::async_listen() {
  const std::chrono::milliseconds timeout(5000);
  if (auto err = co_await conn_.async_connect(conninfo_, timeout)) co_return err;
  for (const auto& channel : channels_) {
    // A channel is an identifier: quoted, it may be any text without a quote.
    const auto sql = "LISTEN \"" + channel + "\"";
    result r;
    if (auto err = co_await conn_.async_exec(sql, r, timeout)) co_return err;
  }
  co_return error{};
}

asio::awaitable<void> listener::async_run() {
  std::vector<notification> got;
  while (!stopped_) {
    auto err = co_await async_listen();
    if (!err && !stopped_) {
      handlers_.listening();
      while (!stopped_ && !(err = co_await conn_.async_notifications(got)))
        for (const auto& n : got) handlers_.notified(n.channel, n.payload);
    }
    if (stopped_) break;
    log::warn("listening for notifications failed; trying again", {{"error", err.message}});
    conn_.close();
    pause_.expires_after(retry_);
    boost::system::error_code ec;
    co_await pause_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  conn_.close();
}

}  // namespace tally::pg
