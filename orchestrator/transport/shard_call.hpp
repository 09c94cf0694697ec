#pragma once
// The wire form of the engine's calls on account_shard's internal API: the
// command a call becomes, and the engine's answer a shard's reply (or its
// absence) means. Pure, so every mapping is unit-tested.
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/shard_protocol.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

// The command a call becomes (one of a /v1/batch body).
contract::shard_command shard_command(const outgoing_call& c, std::string_view tenant);

// The engine's answer for a shard's reply.
answer answer_from_reply(const contract::shard_reply& reply);
// One entry of a /v1/batch reply's "results": a transport failure
// ("bad_reply") when it is not a reply this version can read.
answer answer_from_result(const nlohmann::json& result);

// The answer for every command of a batch that got no per-command results:
// an HTTP status other than 200 (0 when the request was sent and failed in
// transport; one that never left is answer_kind::not_delivered).
answer answer_from_status(int http_status);

}  // namespace tally::orch
