#pragma once
// Calls to one account_shard, coalesced: calls queued while every
// connection is busy go out together as one POST /v1/batch, so many sagas
// share each request and each of the shard's group commits. A few
// connections keep several batches in flight. A call's answer is its
// command's result; a failed request answers every call in it as an
// unknown outcome (the engine re-sends the same key).
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "common/http/client.hpp"
#include "orchestrator/engine/engine.hpp"
#include "orchestrator/routing/routing.hpp"

namespace tally::orch {

struct shard_client_options {
  std::size_t max_batch = 500;  // the shard takes up to 1000 commands per request
  std::size_t connections = 4;
  std::chrono::milliseconds timeout{2000};
};

class shard_client {
 public:
  shard_client(boost::asio::any_io_executor ex, shard_endpoint endpoint, std::string token,
               shard_client_options options = {});
  ~shard_client();
  shard_client(const shard_client&) = delete;
  shard_client& operator=(const shard_client&) = delete;

  boost::asio::awaitable<answer> async_call(nlohmann::json command);

  const shard_endpoint& endpoint() const { return endpoint_; }
  std::size_t requests_sent() const { return requests_; }

 private:
  struct pending {
    nlohmann::json command;
    answer result;
    boost::asio::steady_timer* done = nullptr;
    bool finished = false;
  };
  boost::asio::awaitable<void> run_sender();
  boost::asio::awaitable<void> send_batch(http::client& client, std::vector<pending*>& batch);
  void wake_sender();
  static void finish(pending* p, answer a);

  boost::asio::any_io_executor ex_;
  shard_endpoint endpoint_;
  std::string token_;
  shard_client_options options_;
  std::deque<pending*> queue_;
  std::unordered_set<pending*> in_flight_;  // taken by a sender, not answered yet
  std::deque<boost::asio::steady_timer*> idle_senders_;
  std::size_t requests_ = 0;
  std::shared_ptr<bool> alive_;  // senders stop when the client is destroyed
};

}  // namespace tally::orch
