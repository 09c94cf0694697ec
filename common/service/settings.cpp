#include "common/service/settings.hpp"

#include <unistd.h>

namespace tally::service {

http::server_options read_listen(const config::config& cfg, const std::string& prefix, std::uint16_t default_port) {
  http::server_options o;
  o.address = cfg.get_string(prefix + ".address", "127.0.0.1");
  o.port = static_cast<std::uint16_t>(cfg.get_int(prefix + ".port", default_port));
  return o;
}

std::string required_string(const config::config& cfg, const std::string& key, std::string_view hint) {
  auto value = cfg.get_string(key, "");
  if (value.empty())
    throw std::runtime_error(key + " is required" + std::string(hint) + " (" + cfg.env_name(key) + ")");
  return value;
}

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace tally::service
