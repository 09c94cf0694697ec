#pragma once
// An account as every service shows it (API.md's account resource), defined
// once: the shard builds it from its row, carries it in its outbox events
// and serves it; the relay projects it; the gateway serves the projection.
// Each form is a named conversion of this one type.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tally::contract {

struct account_document {
  std::string tenant;
  std::string account_id;
  std::int64_t balance = 0;
  std::int64_t held = 0;
  std::string status;  // active, frozen, closed
  std::int64_t version = 0;
  // The earliest expiry still to come (unix ms) and what it will take; none: nothing expires.
  std::optional<std::int64_t> next_expiry_at;
  std::int64_t next_expiry_amount = 0;
};

// The command that changed the account, named in its event.
struct account_cause {
  std::string type;
  std::string biz_id;
};

// An outbox event's payload (account.credited, ...): the document with its
// tenant and its cause, without updated_at (the event's own time).
nlohmann::json event_payload(const account_document& a, const account_cause& cause);
// The payload of an event no command caused (an operator's freeze or
// unfreeze: account.frozen, account.active): the same, without a cause.
nlohmann::json event_payload(const account_document& a);

// API.md's account: without the tenant, with updated_at.
nlohmann::json public_json(const account_document& a, std::int64_t updated_at_ms);

// The shard's internal read: the public form with the tenant.
nlohmann::json internal_json(const account_document& a, std::int64_t updated_at_ms);

// An event's payload as the public form at the event's time: every field
// it carries but the tenant and the cause, as an older event carries them.
// Nullopt when the payload is not an object.
std::optional<nlohmann::json> public_from_payload(nlohmann::json payload, std::int64_t updated_at_ms);

// "next_expiry": {"at", "amount"}, or null.
nlohmann::json next_expiry_json(std::optional<std::int64_t> at_ms, std::int64_t amount);

}  // namespace tally::contract
