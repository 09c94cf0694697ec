#pragma once
// The error codes of API.md's error shape, each with its one HTTP status.
#include <string_view>

#include "common/contract/enum_names.hpp"

namespace tally::contract {

TALLY_NAMED_ENUM(error_code,
                 invalid_request,       // 400
                 unauthorized,          // 401
                 forbidden,             // 403
                 not_found,             // 404
                 invalid_state,         // 409
                 payload_too_large,     // 413
                 idempotency_conflict,  // 422
                 rate_limited,          // 429
                 account_busy,  // 429: the account's queue is past the shard's safe wait; nothing changed, retry later
                 internal,      // 500
                 unavailable);  // 503: not accepted; safe to retry with the same biz_id

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
