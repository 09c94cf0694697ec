#pragma once
// Real service processes (account_shard, orchestrator) for integration
// tests, and a blocking HTTP client to talk to them.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace tally::test {

inline constexpr const char* internal_token = "test-internal-token-0123456789";

struct http_reply {
  int status = 0;  // 0: transport error
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

// One keep-alive connection to 127.0.0.1:port; reconnects after errors.
class http_client {
 public:
  explicit http_client(std::uint16_t port);
  ~http_client();
  http_reply call(const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& token = internal_token, const std::map<std::string, std::string>& headers = {});
  http_reply raw(const std::string& bytes);  // send bytes as they are, read one response

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

std::uint16_t free_port();

// With TALLY_RECORD_RESPONSES=<file> set, every http_client response from
// this port is appended to that file (one JSON line each).
void record_responses_of(std::uint16_t port);

// A real service process (its binary from the build directory), started
// with the database, port and internal token set; its output goes to a log
// file the tests print on failure.
class service_process {
 public:
  service_process(std::string binary, std::string env_prefix, std::string conninfo, std::uint16_t port,
                  std::vector<std::string> args, std::map<std::string, std::string> env);
  ~service_process();
  service_process(const service_process&) = delete;
  service_process& operator=(const service_process&) = delete;
  void start();
  // Polls /readyz until 200 or the deadline.
  bool wait_ready(std::chrono::milliseconds deadline = std::chrono::seconds(15));
  void kill9();
  void terminate();  // SIGTERM
  // Waits for the process to end; returns its exit code (128+signal when killed).
  int wait_exit(std::chrono::milliseconds deadline = std::chrono::seconds(15));
  bool running();
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  const std::string& log_path() const { return log_; }
  // Changes the environment of the next start().
  void set_env(const std::string& key, const std::string& value) { env_[key] = value; }

 private:
  std::string binary_;
  std::string env_prefix_;
  std::string conninfo_;
  std::uint16_t port_;
  std::vector<std::string> args_;
  std::map<std::string, std::string> env_;
  std::string log_;
  pid_t pid_ = -1;
  int last_status_ = -1;
};

class shard_process : public service_process {
 public:
  shard_process(std::string conninfo, std::uint16_t port, std::vector<std::string> args = {},
                std::map<std::string, std::string> env = {})
      : service_process("account_shard/account_shard", "TALLY_SHARD", std::move(conninfo), port, std::move(args),
                        std::move(env)) {}
};

// `shards` is the routing spec, e.g. "s0=127.0.0.1:7101;s1=127.0.0.1:7102".
class orchestrator_process : public service_process {
 public:
  orchestrator_process(std::string conninfo, std::uint16_t port, const std::string& shards,
                       std::vector<std::string> args = {}, std::map<std::string, std::string> env = {})
      : service_process("orchestrator/orchestrator", "TALLY_ORCH", std::move(conninfo), port,
                        with_shards(std::move(args), shards), std::move(env)) {}

 private:
  static std::vector<std::string> with_shards(std::vector<std::string> args, const std::string& shards) {
    args.insert(args.begin(), "--shards=" + shards);
    return args;
  }
};

// Polls `cond` until true or the deadline passes.
template <typename F>
bool eventually(F cond, std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    struct timespec ts {
      0, 20'000'000
    };
    nanosleep(&ts, nullptr);
  }
  return cond();
}

}  // namespace tally::test
