#pragma once
// The relay's HTTP endpoints: /healthz, /readyz, /metrics without a token;
// with the internal token, GET /v1/consumers (each source → sink consumer:
// whether this instance holds it, and its lag) and /v1/admin/failpoints.
#include <memory>
#include <vector>

#include "common/http/route_table.hpp"
#include "common/http/server.hpp"
#include "relay/service/pump.hpp"

namespace tally::relay {

struct route_context : http::internal_context {
  const std::vector<std::unique_ptr<pump>>& pumps;
};

http::handler make_handler(route_context& ctx);
// The body limit of each request, from the route table.
http::body_limit_rule body_limits();

}  // namespace tally::relay
