#pragma once
// Calls to one account_shard, coalesced: calls queued while every
// connection is busy go out together as one POST /v1/batch, so many sagas
// share each request and each of the shard's group commits. A few
// connections keep several batches in flight. A call's answer is its
// command's result; a failed request answers every call in it as an
// unknown outcome (the engine re-sends the same key).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/batching/coalescer.hpp"
#include "common/http/client.hpp"
#include "orchestrator/engine/engine.hpp"
#include "common/sharding/routing.hpp"

namespace tally::orch {

struct shard_client_options {
  std::size_t max_batch = 500;  // the shard takes up to 1000 commands per request
  std::size_t connections = 4;
  std::chrono::milliseconds timeout{2000};
};

class shard_client {
 public:
  shard_client(boost::asio::any_io_executor ex, sharding::shard_endpoint endpoint, std::string token,
               shard_client_options options = {});
  ~shard_client() { *alive_ = false; }
  shard_client(const shard_client&) = delete;
  shard_client& operator=(const shard_client&) = delete;

  // `command`: one command in its wire form, contract::to_json(...).dump().
  boost::asio::awaitable<answer> async_call(std::string command) { return calls_.async_submit(std::move(command)); }

  const sharding::shard_endpoint& endpoint() const { return endpoint_; }
  std::size_t requests_sent() const { return calls_.flushes(); }

 private:
  boost::asio::awaitable<void> send_batch(std::size_t connection, std::vector<std::string>& commands,
                                          std::vector<answer>& answers);

  sharding::shard_endpoint endpoint_;
  std::string token_;
  shard_client_options options_;
  // Shared with a request in flight, which may outlive the client.
  std::vector<std::shared_ptr<http::client>> connections_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Last: destroyed first, while the connections still exist.
  batching::coalescer<std::string, answer> calls_;
};

}  // namespace tally::orch
