#pragma once
// Timestamps as every service writes them: RFC 3339, UTC, milliseconds.
#include <cstdint>
#include <string>

namespace tally::time {

// 2026-12-01T10:00:00.123Z for 1764583200123.
std::string rfc3339_ms(std::int64_t unix_ms);

}  // namespace tally::time
