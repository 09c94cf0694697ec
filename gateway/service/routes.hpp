#pragma once
// The public API (shared/API.md) over HTTP: authenticate the API key,
// check the role, validate the request, take the rate-limit tokens, then
// forward writes to the orchestrator (sagas) or the owning shard (accounts)
// and answer reads from the Redis projections, falling back to the
// authority (shard or orchestrator) when a projection is missing, Redis is
// down, or the caller asks for consistency=strong. Every response carries
// X-Request-Id; reads say where they came from in X-Tally-Read
// (projection | authority).
//
// Without a key: the operators' console (/console/) and the OpenAPI file
// (/v1/openapi.yaml).
//
// The internal listener (127.0.0.1, its own port and body limit) serves the
// probes and POST /internal/events (internal token): the relay's pushed
// events, published to this gateway's WebSocket subscribers.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/failover_pool.hpp"
#include "common/http/server.hpp"
#include "common/metrics/metrics.hpp"
#include "common/redis/client.hpp"
#include "common/sharding/routing.hpp"
#include "gateway/auth/api_keys.hpp"
#include "gateway/service/clusters.hpp"
#include "gateway/limit/rate_limiter.hpp"
#include "gateway/stream/hub.hpp"

namespace tally::gateway {

struct route_context {
  const api_keys& keys;
  rate_limiter& limiter;
  redis::client& redis;
  hub& events;
  http::failover_pool& orchestrator;                        // one or more instances
  std::vector<std::unique_ptr<http::client_pool>>& shards;  // in routing order
  const sharding::routing_table& routes;
  std::string upstream_token;  // presented to the orchestrator and the shards
  std::string internal_token;  // expected from the relay
  metrics::registry& metrics;
  std::function<bool()> ready;
  std::chrono::milliseconds upstream_timeout{5000};
  http::client_pool* relay = nullptr;       // for the operators' health page, when configured
  std::string console_dir{};                // the console's files from this folder, else the built-in ones
  const cluster_watch* clusters = nullptr;  // the replicated clusters' monitor, when configured
};

// Every route of the public listener: [{"method", "path", "body_limit",
// "access"}] (`gateway --routes` prints it; the OpenAPI test compares it
// with the file).
nlohmann::json route_list();

http::handler make_handler(route_context& ctx);
// The public listener's body limit of each request, from the route table.
http::body_limit_rule body_limits();
http::handler make_internal_handler(route_context& ctx);

}  // namespace tally::gateway
