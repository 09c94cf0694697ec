#pragma once
// tallyctl's connection to the gateway: blocking calls (a command line runs
// one thing at a time) over the project's HTTP client, and the WebSocket
// stream for `sagas watch`.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace tally::ctl {

// http://host:port (no path), as --url and TALLY_URL give it.
struct endpoint {
  std::string host;
  std::uint16_t port = 0;
};
// nullopt unless the text is http://host[:port][/]: the port defaults to 80.
std::optional<endpoint> parse_url(std::string_view url);

struct api_reply {
  int status = 0;         // 0: the gateway could not be reached
  nlohmann::json body;    // the answer's JSON (the error shape when status >= 400)
  std::string transport;  // why it could not be reached
};

class api_client {
 public:
  api_client(endpoint at, std::string key, std::chrono::milliseconds timeout)
      : at_(std::move(at)), key_(std::move(key)), timeout_(timeout) {}

  api_reply get(const std::string& target) const;
  api_reply post(const std::string& target, const nlohmann::json& body) const;
  // Subscribes to a saga's changes on /v1/stream, then calls `each` with
  // nothing (subscribed) and with every frame that follows (the saga's
  // states, and the server's pings) until it returns false; false when the
  // stream could not be opened or closed first (`why` says why).
  bool watch_saga(const std::string& saga_id, const std::function<bool(const nlohmann::json&)>& each,
                  std::string& why) const;

 private:
  api_reply call(const std::string& method, const std::string& target, std::string body) const;

  endpoint at_;
  std::string key_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tally::ctl
