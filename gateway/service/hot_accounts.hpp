#pragma once
// What the gateway makes of a shard's hot-account admission
// (docs/account_shard.md), pure so that it is unit-tested: a refusal,
// whichever upstream passes it on — an answer whose error code is
// `account_busy` (the account's queue was past the shard's safe wait;
// nothing changed) reaches the client as 429 account_busy with
// Retry-After; and the hottest accounts a shard names, of every tenant,
// of which an operator sees their own.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tally::gateway {

// For an upstream answer (status, body, its Retry-After header or ""):
// the Retry-After in whole seconds the client gets — the upstream's when it
// is a whole number of at least 1, else 1 — when the answer is an error
// with code account_busy; none otherwise.
std::optional<std::int64_t> account_busy_retry_after(unsigned status, std::string_view body,
                                                     std::string_view retry_after);

// A shard's GET /v1/status with only `tenant`'s accounts left in
// admission.hottest, without their tenant.
void keep_own_hot_accounts(nlohmann::json& status, const std::string& tenant);

}  // namespace tally::gateway
