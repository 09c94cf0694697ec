#include "tests/support/stack.hpp"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "tests/support/pg_fixture.hpp"

namespace tally::test {

namespace {

void must_be_ready(service_process& p, const char* what) {
  if (!p.wait_ready()) throw std::runtime_error(std::string(what) + " did not become ready; log " + p.log_path());
}

}  // namespace

std::string unique_id(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

nlohmann::json held_deduction(http_client& client, const std::string& account, std::int64_t amount) {
  const nlohmann::json body{
      {"account_id", account}, {"amount", amount}, {"biz_id", unique_id("h")}, {"hold_timeout_ms", 60000}};
  const auto r = client.call("POST", "/v1/deductions?wait_ms=5000", body.dump(), acme_app_key);
  EXPECT_EQ(r.json()["state"], "awaiting_confirmation") << r.body;
  return r.json();
}

stack::stack(const stack_options& options) {
  redis_.start();
  for (int i = 0; i < 2; ++i) shard_dbs_.push_back(create_database("stack_shard"));
  saga_db_ = create_database("stack_sagas");
  std::vector<std::uint16_t> shard_ports{free_port(), free_port()};
  routes_ = "s0=127.0.0.1:" + std::to_string(shard_ports[0]) + ";s1=127.0.0.1:" + std::to_string(shard_ports[1]);
  for (std::size_t i = 0; i < 2; ++i) {
    shards_.push_back(std::make_unique<shard_process>(shard_dbs_[i], shard_ports[i]));
    shards_.back()->start();
  }
  for (auto& s : shards_) must_be_ready(*s, "a shard");
  std::string orchestrator_list;
  for (std::size_t i = 0; i < options.orchestrators; ++i) {
    orchestrators_.push_back(std::make_unique<orchestrator_process>(saga_db_, free_port(), routes_));
    orchestrators_.back()->start();
    if (i) orchestrator_list += ',';
    orchestrator_list += "127.0.0.1:" + std::to_string(orchestrators_.back()->port());
  }
  for (auto& o : orchestrators_) must_be_ready(*o, "an orchestrator");

  const std::string keys = "acme:app:" + digest::sha256_hex(acme_app_key) +
                           ";acme:operator:" + digest::sha256_hex(acme_operator_key) +
                           ";globex:app:" + digest::sha256_hex(globex_app_key) +
                           ";globex:operator:" + digest::sha256_hex(globex_operator_key);
  gateway_internal_port_ = free_port();
  relay_port_ = free_port();
  std::vector<std::string> gateway_args{
      "--orchestrator=" + orchestrator_list,           "--internal.port=" + std::to_string(gateway_internal_port_),
      "--relay.port=" + std::to_string(relay_port_),   "--shards=" + routes_,
      "--redis.port=" + std::to_string(redis_.port()), "--api_keys=" + keys};
  gateway_args.insert(gateway_args.end(), options.gateway_args.begin(), options.gateway_args.end());
  gateway_ = std::make_unique<service_process>("gateway/gateway", "TALLY_GATEWAY", "", free_port(), gateway_args,
                                               std::map<std::string, std::string>{});
  gateway_->start();
  must_be_ready(*gateway_, "the gateway");
  record_responses_of(gateway_->port());
  relay_args_ = options.relay_args;
  relay_ = relay_on(relay_port_, {}, options.relay_env);
  relay_->start();
  must_be_ready(*relay_, "the relay");
}

stack::~stack() = default;

std::unique_ptr<service_process> stack::make_relay(std::vector<std::string> args,
                                                   std::map<std::string, std::string> env) const {
  return relay_on(free_port(), std::move(args), std::move(env));
}

std::unique_ptr<service_process> stack::relay_on(std::uint16_t port, std::vector<std::string> args,
                                                 std::map<std::string, std::string> env) const {
  nlohmann::json sources = nlohmann::json::array();
  for (std::size_t i = 0; i < shard_dbs_.size(); ++i)
    sources.push_back({{"name", "s" + std::to_string(i)}, {"kind", "shard"}, {"conninfo", shard_dbs_[i]}});
  sources.push_back({{"name", "orchestrator"}, {"kind", "orchestrator"}, {"conninfo", saga_db_}});
  env["TALLY_RELAY_SOURCES"] = sources.dump();
  std::vector<std::string> all{"--redis.port=" + std::to_string(redis_.port()),
                               "--gateways=g0=127.0.0.1:" + std::to_string(gateway_internal_port_),
                               "--standby_poll_ms=100", "--retry_max_ms=500"};
  all.insert(all.end(), relay_args_.begin(), relay_args_.end());
  all.insert(all.end(), args.begin(), args.end());
  return std::make_unique<service_process>("relay/relay", "TALLY_RELAY", "", port, all, env);
}

}  // namespace tally::test
