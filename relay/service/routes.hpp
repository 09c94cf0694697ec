#pragma once
// The relay's HTTP endpoints: /healthz, /readyz, /metrics without a token;
// with the internal token, GET /v1/consumers (each source → sink consumer:
// whether this instance holds it, and its lag) and /v1/admin/failpoints.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/http/server.hpp"
#include "common/metrics/metrics.hpp"
#include "relay/service/pump.hpp"

namespace tally::relay {

struct route_context {
  const std::vector<std::unique_ptr<pump>>& pumps;
  metrics::registry& metrics;
  std::string internal_token;
  std::function<bool()> ready;
};

http::handler make_handler(route_context& ctx);
// The body limit of each request, from the route table.
http::body_limit_rule body_limits();

}  // namespace tally::relay
