#pragma once
// A shard's hot-account refusal, whichever upstream passes it on: an
// answer whose error code is `account_busy` (the account's queue was past
// the shard's safe wait; nothing changed) reaches the client as 429
// account_busy with Retry-After. Pure, so the mapping is unit-tested.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::gateway {

// For an upstream answer (status, body, its Retry-After header or ""):
// the Retry-After in whole seconds the client gets — the upstream's when it
// is a whole number of at least 1, else 1 — when the answer is an error
// with code account_busy; none otherwise.
std::optional<std::int64_t> account_busy_retry_after(unsigned status, std::string_view body,
                                                     std::string_view retry_after);

}  // namespace tally::gateway
