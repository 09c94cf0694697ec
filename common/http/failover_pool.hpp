#pragma once
// Several interchangeable instances of one service (orchestrators sharing a
// saga store): a request goes to the instance that answered last; when that
// one cannot be reached at all (nothing of the request was sent, so it cannot
// have acted), the next is tried at once. An answer, or a failure after
// sending, is returned as it is: the caller decides whether resending is safe.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/http/client_pool.hpp"

namespace tally::http {

struct upstream_endpoint {
  std::string host;
  std::uint16_t port = 0;
};

class failover_pool {
 public:
  failover_pool(boost::asio::any_io_executor ex, const std::vector<upstream_endpoint>& instances,
                std::size_t max_connections_each);

  boost::asio::awaitable<client_response> async_request(request req, std::chrono::milliseconds timeout);

 private:
  std::vector<std::unique_ptr<client_pool>> pools_;
  std::size_t current_ = 0;
};

}  // namespace tally::http
