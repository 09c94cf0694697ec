#include "common/contract/account_document.hpp"

#include <nlohmann/json.hpp>

#include "common/time/rfc3339.hpp"

namespace tally::contract {

namespace {

// The fields every form shares.
nlohmann::json figures_of(const account_document& a) {
  return {{"account_id", a.account_id},
          {"balance", a.balance},
          {"held", a.held},
          {"available", a.balance - a.held},
          {"status", a.status},
          {"version", a.version},
          {"next_expiry", next_expiry_json(a.next_expiry_at, a.next_expiry_amount)}};
}

}  // namespace

nlohmann::json next_expiry_json(std::optional<std::int64_t> at_ms, std::int64_t amount) {
  if (!at_ms) return nullptr;
  return {{"at", time::rfc3339_ms(*at_ms)}, {"amount", amount}};
}

nlohmann::json event_payload(const account_document& a) {
  auto j = figures_of(a);
  j["tenant"] = a.tenant;
  return j;
}

nlohmann::json event_payload(const account_document& a, const account_cause& cause) {
  auto j = event_payload(a);
  j["cause"] = {{"type", cause.type}, {"biz_id", cause.biz_id}};
  return j;
}

nlohmann::json public_json(const account_document& a, std::int64_t updated_at_ms) {
  auto j = figures_of(a);
  j["updated_at"] = time::rfc3339_ms(updated_at_ms);
  return j;
}

nlohmann::json internal_json(const account_document& a, std::int64_t updated_at_ms) {
  auto j = public_json(a, updated_at_ms);
  j["tenant"] = a.tenant;
  return j;
}

std::optional<nlohmann::json> public_from_payload(nlohmann::json payload, std::int64_t updated_at_ms) {
  if (!payload.is_object()) return std::nullopt;
  payload.erase("tenant");
  payload.erase("cause");
  payload["updated_at"] = time::rfc3339_ms(updated_at_ms);
  return payload;
}

}  // namespace tally::contract
