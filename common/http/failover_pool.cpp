#include "common/http/failover_pool.hpp"

#include <stdexcept>

namespace tally::http {

failover_pool::failover_pool(boost::asio::any_io_executor ex, const std::vector<upstream_endpoint>& instances,
                             std::size_t max_connections_each) {
  if (instances.empty()) throw std::invalid_argument("failover_pool needs at least one instance");
  for (const auto& i : instances)
    pools_.push_back(std::make_unique<client_pool>(ex, i.host, i.port, max_connections_each));
}

boost::asio::awaitable<client_response> failover_pool::async_request(request req, std::chrono::milliseconds timeout) {
  client_response last;
  for (std::size_t tried = 0; tried < pools_.size(); ++tried) {
    const auto i = (current_ + tried) % pools_.size();
    const bool more = tried + 1 < pools_.size();
    request attempt = more ? req : std::move(req);
    last = co_await pools_[i]->async_request(std::move(attempt), timeout);
    if (!last.error || last.sent) {
      current_ = i;
      co_return last;
    }
  }
  co_return last;
}

}  // namespace tally::http
