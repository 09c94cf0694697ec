#pragma once
// The error codes of API.md's error shape, each with its one HTTP status.
#include <string_view>

#include "common/contract/enum_names.hpp"

namespace tally::contract {

enum class error_code {
  invalid_request,       // 400
  unauthorized,          // 401
  forbidden,             // 403
  not_found,             // 404
  invalid_state,         // 409
  payload_too_large,     // 413
  idempotency_conflict,  // 422
  rate_limited,          // 429
  account_busy,          // 429: the account's queue is past the shard's safe wait; nothing changed, retry later
  internal,              // 500
  unavailable,           // 503: not accepted; safe to retry with the same biz_id
};

inline constexpr enum_names<error_code, 11> error_code_names{
    {{error_code::invalid_request, "invalid_request"},
     {error_code::unauthorized, "unauthorized"},
     {error_code::forbidden, "forbidden"},
     {error_code::not_found, "not_found"},
     {error_code::invalid_state, "invalid_state"},
     {error_code::payload_too_large, "payload_too_large"},
     {error_code::idempotency_conflict, "idempotency_conflict"},
     {error_code::rate_limited, "rate_limited"},
     {error_code::account_busy, "account_busy"},
     {error_code::internal, "internal"},
     {error_code::unavailable, "unavailable"}}};

static_assert(names_every_value(error_code_names));

constexpr std::string_view to_string(error_code c) { return name_of(error_code_names, c); }

constexpr unsigned http_status(error_code c) {
  switch (c) {
    case error_code::invalid_request: return 400;
    case error_code::unauthorized: return 401;
    case error_code::forbidden: return 403;
    case error_code::not_found: return 404;
    case error_code::invalid_state: return 409;
    case error_code::payload_too_large: return 413;
    case error_code::idempotency_conflict: return 422;
    case error_code::rate_limited:
    case error_code::account_busy: return 429;
    case error_code::internal: return 500;
    case error_code::unavailable: return 503;
  }
  return 500;
}

}  // namespace tally::contract
