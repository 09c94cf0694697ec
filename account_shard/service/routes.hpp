#pragma once
// The shard's internal HTTP API (JSON). Everything under /v1/ requires the
// internal token; /healthz, /readyz and /metrics do not.
//   POST /v1/commands                     one command → its reply
//   POST /v1/batch                        {"commands":[...]} → {"results":[...]}
//   GET  /v1/accounts/{tenant}?status=active|frozen|closed&limit=   accounts in that status
//   GET  /v1/accounts/{tenant}/{id}       the account
//   GET  /v1/accounts/{tenant}/{id}/entries?after=&limit=
//   GET  /v1/accounts/{tenant}/{id}/holds
//   GET  /v1/accounts/{tenant}/{id}/lots?state=open|all&limit=&after=
//   POST /v1/accounts/{tenant}/{id}/freeze | /unfreeze
//   GET  /v1/operations/{tenant}/{id}/{biz_type}/{biz_id}
//   GET  /v1/holds/old?older_than_ms=&limit=
//   GET  /v1/reconciliation?watermark=&freeze=true|false&tenant=   (recorded)
//   GET  /v1/reconciliation/runs?tenant=&limit=   the recorded runs, newest first
//   GET  /v1/status                       leader, epoch, commit figures, relay backlog
//   POST /v1/admin/failpoints             {"spec":"before_commit=crash"}
//   GET|POST /v1/admin/clock              {"offset_ms": N}: moves the shard's clock (only
//                                         with testing.clock_control; else 404)
#include <cstdint>
#include <functional>

#include <boost/asio/awaitable.hpp>

#include "account_shard/service/clock.hpp"
#include "account_shard/service/commit_queue.hpp"
#include "account_shard/store/queries.hpp"
#include "common/http/route_table.hpp"
#include "common/http/server.hpp"

namespace tally::shard {

struct route_context : http::internal_context {
  commit_queue& commits;
  queries& reads;
  std::function<std::int64_t()> writer_epoch;
  shard_clock& clock;
  bool clock_control = false;
  std::function<void()> audit_started;  // wakes the audit job
};

http::handler make_handler(route_context& ctx);
// The body limit of each request, from the route table.
http::body_limit_rule body_limits();

}  // namespace tally::shard
