#pragma once
// Keep-alive connections to one upstream service, shared by concurrent
// requests on one io_context thread: a request borrows an idle client or
// opens another (up to `max_connections`), and waits for one to come back
// when all are busy.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/http/client.hpp"

namespace tally::http {

class client_pool {
 public:
  client_pool(boost::asio::any_io_executor ex, std::string host, std::uint16_t port, std::size_t max_connections);
  ~client_pool();
  client_pool(const client_pool&) = delete;
  client_pool& operator=(const client_pool&) = delete;

  // As client::async_request; `timeout` covers waiting for a connection too.
  boost::asio::awaitable<client_response> async_request(request req, std::chrono::milliseconds timeout);

 private:
  boost::asio::any_io_executor ex_;
  std::string host_;
  std::uint16_t port_;
  std::size_t max_;
  std::size_t open_ = 0;
  std::vector<std::unique_ptr<client>> idle_;
  std::deque<boost::asio::steady_timer*> waiters_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tally::http
