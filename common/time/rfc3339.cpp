#include "common/time/rfc3339.hpp"

#include <array>
#include <cstdio>
#include <ctime>

namespace tally::time {

std::string rfc3339_ms(std::int64_t unix_ms) {
  auto secs = unix_ms / 1000, ms = unix_ms % 1000;
  if (ms < 0) secs -= 1, ms += 1000;  // floor division for times before 1970
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 64> buf{};  // room for any int the compiler can imagine
  std::snprintf(buf.data(), buf.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf.data();
}

}  // namespace tally::time
