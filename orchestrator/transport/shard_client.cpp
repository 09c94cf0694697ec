#include "orchestrator/transport/shard_client.hpp"

#include <nlohmann/json.hpp>

#include "orchestrator/transport/shard_call.hpp"

namespace tally::orch {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

shard_client::shard_client(asio::any_io_executor ex, sharding::shard_endpoint endpoint, std::string token,
                           shard_client_options options)
    : endpoint_(std::move(endpoint)),
      token_(std::move(token)),
      options_(options),
      calls_(
          ex, options.connections, options.max_batch,
          [this](std::size_t c, std::vector<std::string>& commands, std::vector<answer>& answers) {
            return send_batch(c, commands, answers);
          },
          answer{answer_kind::transport, "shutting_down"}) {
  for (std::size_t i = 0; i < options_.connections; ++i)
    connections_.push_back(std::make_shared<http::client>(ex, endpoint_.host, endpoint_.port));
}

asio::awaitable<void> shard_client::send_batch(std::size_t connection, std::vector<std::string>& commands,
                                               std::vector<answer>& answers) {
  auto alive = alive_;
  auto conn = connections_[connection];
  // The commands are already JSON text: the body joins them.
  std::string body = R"({"commands":[)";
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (i) body += ',';
    body += commands[i];
  }
  body += "]}";
  std::string target = "/v1/batch";
  auto r = co_await conn->async_json(bhttp::verb::post, std::move(target), std::move(body), options_.timeout, token_);
  if (!*alive) co_return;
  if (r.error && !r.sent) {
    answers.assign(commands.size(), answer{answer_kind::not_delivered, "unreachable"});
    co_return;
  }
  answers.assign(commands.size(), answer_from_status(r.error ? 0 : r.message.result_int()));
  if (!r.error && r.message.result_int() == 200) {
    auto reply = nlohmann::json::parse(r.message.body(), nullptr, false);
    const auto results = reply.is_object() ? reply.value("results", nlohmann::json()) : nlohmann::json();
    if (results.is_array() && results.size() == commands.size()) {
      for (std::size_t i = 0; i < commands.size(); ++i) answers[i] = answer_from_result(results[i]);
    } else {
      for (auto& a : answers) a = {answer_kind::transport, "bad_reply"};
    }
  } else if (r.error == asio::error::timed_out) {
    for (auto& a : answers) a.code = "timeout";
  }
}

}  // namespace tally::orch
