#pragma once
// The orchestrator's internal HTTP API, used by the gateway. Everything
// under /v1/ requires the internal token; the gateway names the caller's
// tenant in the path. Bodies, resources, status codes and errors are those
// of the public API (shared/API.md), so the gateway passes them through.
//   POST /v1/tenants/{t}/credits | deductions | refunds | transfers | batch-deductions   [?wait_ms=]
//   POST /v1/tenants/{t}/deductions/{saga_id}/confirm | cancel                           [?wait_ms=]
//   GET  /v1/tenants/{t}/sagas/{saga_id}                                                 [?wait_ms=]
//   GET  /v1/tenants/{t}/sagas?type=&biz_id=
//   GET  /v1/tenants/{t}/admin/sagas?state=&type=&biz_id=&older_than_ms=&overdue=true&limit=&cursor=
//   GET  /v1/tenants/{t}/admin/sagas/counts           {"counts": {state: n}, "overdue": n}
//   GET  /v1/tenants/{t}/admin/sagas/{saga_id}        the saga with every attempt of every step
//   POST /v1/tenants/{t}/admin/sagas/{saga_id}/retry | abort
//   GET  /v1/workflows                                 every saga definition
//   GET|POST /v1/admin/failpoints
#include "common/http/route_table.hpp"
#include "common/http/server.hpp"
#include "orchestrator/service/saga_runner.hpp"

namespace tally::orch {

struct route_context : http::internal_context {
  saga_runner& runner;
  saga_store& store;
};

http::handler make_handler(route_context& ctx);
// The body limit of each request, from the route table.
http::body_limit_rule body_limits();

}  // namespace tally::orch
