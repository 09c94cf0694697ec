#pragma once
// What every tallyctl command shares: the global options, the request
// targets it builds, how an answer is shown (rendered, or as JSON) with its
// exit status, and `sagas watch`.
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gateway/tallyctl/api_client.hpp"

namespace tally::ctl {

// --url, --key, --json and --wait-ms.
struct options {
  std::string url = "http://127.0.0.1:8080";
  std::string key;
  bool as_json = false;
  std::int64_t wait_ms = 5000;
};

// A target: path segments (encoded here) and query parameters (empty ones left out).
std::string target(std::initializer_list<std::string> segments,
                   std::initializer_list<std::pair<std::string, std::string>> query = {});

// A number as a query parameter: empty (left out) when not given.
std::string text(std::optional<std::int64_t> v);

class command_line {
 public:
  using renderer = std::string (*)(const nlohmann::json&);

  explicit command_line(const options& o) : o_(o) {}

  // Prints a request's answer (rendered, or as JSON) and returns the exit status.
  int show(const api_reply& r, renderer render) const;
  api_client client() const;
  // A request, shown as above.
  int get(const std::string& target, renderer render) const { return show(client().get(target), render); }
  int post(const std::string& target, const nlohmann::json& body, renderer render) const {
    return show(client().post(target, body), render);
  }
  // Follows a saga until it ends (sagas watch): its state once subscribed,
  // then each change. The saga is read again whenever a frame (a change, or
  // the server's ping) comes more than 5 s after the last read, so a change
  // that raced the subscription is still seen. Returns the exit status.
  int watch(const std::string& id) const;
  // A write's target: POST /v1/<collection>?wait_ms=...
  std::string write_target(const char* collection) const;

 private:
  void print_state(const nlohmann::json& saga) const;

  const options& o_;
};

}  // namespace tally::ctl
