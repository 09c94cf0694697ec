#pragma once
// The whole system as real processes for end-to-end tests: one PostgreSQL
// database per shard and one for the orchestrator (on the server
// scripts/test started), a redis-server of its own, two account_shards,
// the orchestrator, the gateway and the relay pushing to it.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/redis_process.hpp"
#include "tests/support/shard_process.hpp"

namespace tally::test {

// Keys of the two test tenants, acme and globex.
inline constexpr const char* acme_app_key = "test-key-acme-app";
inline constexpr const char* acme_operator_key = "test-key-acme-operator";
inline constexpr const char* globex_app_key = "test-key-globex-app";
inline constexpr const char* globex_operator_key = "test-key-globex-operator";

struct stack_options {
  std::size_t orchestrators = 1;          // instances sharing the saga store, all known to the gateway
  std::vector<std::string> gateway_args;  // e.g. --limits.account_rate=5
  std::vector<std::string> relay_args;
  std::map<std::string, std::string> relay_env;  // e.g. TALLY_FAILPOINTS
};

// A name no other test (or test process) uses: PREFIX-pid-n.
std::string unique_id(const std::string& prefix);

// A deduction of `amount` that acme holds on `account` (for a minute),
// through the gateway's `client`: the saga waiting for its confirmation.
nlohmann::json held_deduction(http_client& client, const std::string& account, std::int64_t amount);

class stack {
 public:
  explicit stack(const stack_options& options = {});
  ~stack();

  std::uint16_t gateway_port() const { return gateway_->port(); }
  std::uint16_t gateway_internal_port() const { return gateway_internal_port_; }  // the relay's pushes
  redis_process& redis() { return redis_; }
  shard_process& shard(std::size_t i) { return *shards_[i]; }
  orchestrator_process& orchestrator(std::size_t i = 0) { return *orchestrators_[i]; }
  service_process& gateway() { return *gateway_; }
  service_process& relay() { return *relay_; }
  // Another relay over the same sources and sinks (not started).
  std::unique_ptr<service_process> make_relay(std::vector<std::string> args = {},
                                              std::map<std::string, std::string> env = {}) const;
  const std::string& shard_conninfo(std::size_t i) const { return shard_dbs_[i]; }
  const std::string& saga_conninfo() const { return saga_db_; }
  const std::string& routes() const { return routes_; }

 private:
  redis_process redis_;
  std::vector<std::string> shard_dbs_;
  std::string saga_db_;
  std::string routes_;
  std::uint16_t gateway_internal_port_ = 0;
  std::uint16_t relay_port_ = 0;  // the gateway names it for its health page
  std::unique_ptr<service_process> relay_on(std::uint16_t port, std::vector<std::string> args,
                                            std::map<std::string, std::string> env) const;
  std::vector<std::string> relay_args_;
  std::vector<std::unique_ptr<shard_process>> shards_;
  std::vector<std::unique_ptr<orchestrator_process>> orchestrators_;
  std::unique_ptr<service_process> gateway_;
  std::unique_ptr<service_process> relay_;
};

}  // namespace tally::test
