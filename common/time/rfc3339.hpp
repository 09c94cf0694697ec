#pragma once
// Timestamps as every service writes them: RFC 3339, UTC, milliseconds.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tally::time {

// Now, as Unix milliseconds of the wall clock.
inline std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 2026-12-01T10:00:00.123Z for 1796119200123.
std::string rfc3339_ms(std::int64_t unix_ms);

// Reads an RFC 3339 time in UTC: YYYY-MM-DDTHH:MM:SS, an optional fraction
// of at most 3 digits, then 'Z'. Offsets other than Z and finer fractions
// are refused (nullopt), as is any field out of range.
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text);

}  // namespace tally::time
