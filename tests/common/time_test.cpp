// RFC 3339 UTC times: formatting and the strict parser of the API's inputs.
#include "common/time/rfc3339.hpp"

#include <gtest/gtest.h>

namespace {

using tally::time::parse_rfc3339_ms;
using tally::time::rfc3339_ms;

TEST(Rfc3339, ParsesWhatItFormats) {
  for (std::int64_t ms : {0LL, 1796119200123LL, 951782400000LL /* 2000-02-29 */, 4102444799999LL}) {
    auto back = parse_rfc3339_ms(rfc3339_ms(ms));
    ASSERT_TRUE(back.has_value()) << rfc3339_ms(ms);
    EXPECT_EQ(*back, ms);
  }
}

TEST(Rfc3339, FractionsOfOneToThreeDigits) {
  EXPECT_EQ(parse_rfc3339_ms("2026-12-01T10:00:00Z"), 1796119200000);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-01T10:00:00.1Z"), 1796119200100);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-01T10:00:00.12Z"), 1796119200120);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-01T10:00:00.123Z"), 1796119200123);
}

TEST(Rfc3339, RefusesWhatIsNotAStrictUtcTime) {
  for (const char* bad :
       {"", "2026-12-01", "2026-12-01T10:00:00", "2026-12-01T10:00:00+00:00", "2026-12-01T10:00:00+01:00",
        "2026-12-01T10:00:00.1234Z", "2026-12-01T10:00:00.Z", "2026-13-01T10:00:00Z", "2026-02-29T10:00:00Z",
        "2026-12-32T10:00:00Z", "2026-12-01T24:00:00Z", "2026-12-01T10:60:00Z", "2026-12-01T10:00:60Z",
        "2026-12-01 10:00:00Z", "2026-12-01T10:00:00Zjunk", "+026-12-01T10:00:00Z", "tomorrow"})
    EXPECT_FALSE(parse_rfc3339_ms(bad).has_value()) << bad;
}

}  // namespace
