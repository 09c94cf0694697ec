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

namespace {

// `count` decimal digits at `pos`, or -1.
int digits(std::string_view s, std::size_t pos, std::size_t count) {
  if (pos + count > s.size()) return -1;
  int v = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  constexpr std::array<int, 12> days = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : days[static_cast<std::size_t>(m - 1)];
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

std::optional<std::int64_t> parse_rfc3339_ms(std::string_view s) {
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  const int year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2), hour = digits(s, 11, 2),
            minute = digits(s, 14, 2), second = digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 59)
    return std::nullopt;
  std::size_t pos = 19;
  int ms = 0;
  if (s[pos] == '.') {
    std::size_t n = 0;
    while (pos + 1 + n < s.size() && s[pos + 1 + n] >= '0' && s[pos + 1 + n] <= '9') ++n;
    if (n < 1 || n > 3) return std::nullopt;
    ms = digits(s, pos + 1, n);
    for (std::size_t i = n; i < 3; ++i) ms *= 10;
    pos += 1 + n;
  }
  if (pos + 1 != s.size() || s[pos] != 'Z') return std::nullopt;
  const std::int64_t days = days_from_civil(year, month, day);
  return ((days * 24 + hour) * 60 + minute) * 60'000 + static_cast<std::int64_t>(second) * 1000 + ms;
}

}  // namespace tally::time
