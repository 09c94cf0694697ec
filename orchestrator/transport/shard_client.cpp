#include "orchestrator/transport/shard_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "orchestrator/transport/shard_call.hpp"

namespace tally::orch {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

shard_client::shard_client(asio::any_io_executor ex, shard_endpoint endpoint, std::string token,
                           shard_client_options options)
    : ex_(ex),
      endpoint_(std::move(endpoint)),
      token_(std::move(token)),
      options_(options),
      alive_(std::make_shared<bool>(true)) {
  for (std::size_t i = 0; i < options_.connections; ++i) {
    auto sender = [this, alive = alive_]() -> asio::awaitable<void> {
      if (*alive) co_await run_sender();
    };
    asio::co_spawn(ex_, sender, asio::detached);
  }
}

// Every waiting caller gets an answer: the senders stop without touching
// anything of the client once it is gone.
shard_client::~shard_client() {
  *alive_ = false;
  for (auto* p : queue_) finish(p, {answer_kind::transport, "shutting_down"});
  for (auto* p : in_flight_) finish(p, {answer_kind::transport, "shutting_down"});
  queue_.clear();
  in_flight_.clear();
  while (!idle_senders_.empty()) wake_sender();
}

void shard_client::finish(pending* p, answer a) {
  p->result = std::move(a);
  p->finished = true;
  p->done->cancel();
}

void shard_client::wake_sender() {
  if (idle_senders_.empty()) return;
  idle_senders_.front()->cancel();
  idle_senders_.pop_front();
}

asio::awaitable<answer> shard_client::async_call(nlohmann::json command) {
  asio::steady_timer done(ex_, asio::steady_timer::time_point::max());
  pending p{std::move(command), {}, &done, false};
  queue_.push_back(&p);
  wake_sender();
  while (!p.finished) {
    boost::system::error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return p.result;
}

asio::awaitable<void> shard_client::run_sender() {
  auto alive = alive_;
  http::client client(ex_, endpoint_.host, endpoint_.port);
  std::vector<pending*> batch;
  while (*alive) {
    if (queue_.empty()) {
      asio::steady_timer idle(ex_, asio::steady_timer::time_point::max());
      idle_senders_.push_back(&idle);
      boost::system::error_code ec;
      co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!*alive) co_return;  // the client (and its members) may be gone
      std::erase(idle_senders_, &idle);
      continue;
    }
    batch.clear();
    while (!queue_.empty() && batch.size() < options_.max_batch) {
      batch.push_back(queue_.front());
      in_flight_.insert(queue_.front());
      queue_.pop_front();
    }
    if (!queue_.empty()) wake_sender();
    co_await send_batch(client, batch);
  }
}

asio::awaitable<void> shard_client::send_batch(http::client& client, std::vector<pending*>& batch) {
  auto alive = alive_;
  nlohmann::json commands = nlohmann::json::array();
  for (auto* p : batch) commands.push_back(p->command);
  std::string body = nlohmann::json{{"commands", std::move(commands)}}.dump();
  std::string target = "/v1/batch";
  ++requests_;
  auto r = co_await client.async_json(bhttp::verb::post, std::move(target), std::move(body), options_.timeout, token_);
  if (!*alive) co_return;
  std::vector<answer> answers(batch.size(), answer_from_status(r.error ? 0 : r.message.result_int()));
  if (!r.error && r.message.result_int() == 200) {
    auto reply = nlohmann::json::parse(r.message.body(), nullptr, false);
    const auto results = reply.is_object() ? reply.value("results", nlohmann::json()) : nlohmann::json();
    if (results.is_array() && results.size() == batch.size()) {
      for (std::size_t i = 0; i < batch.size(); ++i) answers[i] = answer_from_result(results[i]);
    } else {
      for (auto& a : answers) a = {answer_kind::transport, "bad_reply"};
    }
  } else if (r.error == asio::error::timed_out) {
    for (auto& a : answers) a.code = "timeout";
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    in_flight_.erase(batch[i]);
    finish(batch[i], std::move(answers[i]));
  }
}

}  // namespace tally::orch
