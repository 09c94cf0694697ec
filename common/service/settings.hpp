#pragma once
// The settings every service reads alike: where it listens, what it cannot
// start without (with the environment variable that would set it), the
// lists it parses, and the host name its instance names start with.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/config/config.hpp"
#include "common/http/server.hpp"

namespace tally::service {

// `<prefix>.address` (127.0.0.1) and `<prefix>.port`; the rest as in
// server_options.
http::server_options read_listen(const config::config& cfg, const std::string& prefix, std::uint16_t default_port);

// The value of `key`; throws "KEY is required<hint> (ENV)" when unset or empty.
std::string required_string(const config::config& cfg, const std::string& key, std::string_view hint = "");

// A parser's result (the value, or why not); throws "what: why".
template <class T>
T required(std::variant<T, std::string> parsed, const std::string& what) {
  if (auto* bad = std::get_if<std::string>(&parsed)) throw std::runtime_error(what + ": " + *bad);
  return std::move(std::get<T>(parsed));
}

std::string host_name();

}  // namespace tally::service
