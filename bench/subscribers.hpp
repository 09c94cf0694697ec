#pragma once
// Open WebSocket subscribers for the gateway benchmark: N connections to
// /v1/stream, each subscribed to a few accounts, counting the frames they
// receive, on a thread of their own.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tally::bench {

class subscribers {
 public:
  // Connects `count` subscribers (round-robin over `accounts`, `per` each)
  // and returns once all are subscribed or failed.
  subscribers(std::uint16_t port, const std::string& api_key, std::size_t count,
              const std::vector<std::string>& accounts, std::size_t per);
  ~subscribers();
  std::size_t open() const;
  std::uint64_t frames() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tally::bench
