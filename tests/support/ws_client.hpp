#pragma once
// A WebSocket client for tests: connects to 127.0.0.1:port, reads frames
// on its own thread into a queue, and lets the test wait for the next one
// with a deadline.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace tally::test {

class ws_client {
 public:
  // Performs the upgrade; `status` is 101 on success, else the HTTP status
  // the server answered with (0 when it could not connect).
  ws_client(std::uint16_t port, const std::string& target, const std::map<std::string, std::string>& headers = {});
  ~ws_client();
  int status() const;
  // The body of the server's answer when it refused the upgrade.
  const std::string& refusal() const;
  // The subprotocol the server chose (Sec-WebSocket-Protocol), or empty.
  const std::string& protocol() const;
  bool send(const std::string& text);
  // The next frame, or nullopt when none came before the deadline or the
  // connection closed.
  std::optional<std::string> next(std::chrono::milliseconds deadline = std::chrono::seconds(5));
  bool closed() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tally::test
