#pragma once
// A real redis-server for integration tests: its own port and directory,
// no persistence, killable and restartable (restarted empty, as after a
// crash without persistence).
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace tally::test {

class redis_process {
 public:
  redis_process();
  ~redis_process();
  redis_process(const redis_process&) = delete;
  redis_process& operator=(const redis_process&) = delete;
  // Starts the server and waits until it answers PING.
  void start();
  void kill9();
  bool ping();
  bool exists(const std::string& key);  // false also when the server does not answer
  // Whether an inline command (words without quotes) gets exactly `reply`
  // in the protocol's bytes, as ":1\r\n".
  bool replies(const std::string& command, std::string_view reply);
  // Whether hash `key` holds `value` in `field`.
  bool field_is(const std::string& key, const std::string& field, const std::string& value);
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace tally::test
