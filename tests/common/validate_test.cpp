// The shared field validation (the shard's command tests cover ids and
// amounts through parse_command as well).
#include "common/validate/fields.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tally::validate {
namespace {

using json = nlohmann::json;

TEST(FieldReader, IntegerInRange) {
  json j = {{"ms", 500}, {"low", 0}, {"float", 1.5}, {"text", "5"}, {"huge", std::uint64_t{1} << 63}};
  field_reader r{j, {}};
  std::int64_t v = -1;
  EXPECT_TRUE(r.integer("ms", v, 1, 1000));
  EXPECT_EQ(v, 500);
  EXPECT_TRUE(r.integer("absent", v, 1, 1000, false));
  EXPECT_EQ(v, 500);  // untouched
  EXPECT_TRUE(r.error.empty());

  for (const char* bad : {"low", "float", "text", "huge", "absent"}) {
    field_reader b{j, {}};
    std::int64_t out = 7;
    EXPECT_FALSE(b.integer(bad, out, 1, 1000)) << bad;
    EXPECT_EQ(out, 7) << bad;
    EXPECT_FALSE(b.error.empty()) << bad;
  }
  field_reader b{j, {}};
  b.integer("low", v, 1, 1000);
  EXPECT_EQ(b.error, "low must be between 1 and 1000");
}

TEST(FieldReader, KeepsTheFirstError) {
  json j = {{"a", 0}, {"b", "x y"}};
  field_reader r{j, {}};
  std::int64_t amount = 0;
  std::string id;
  EXPECT_FALSE(r.amount("a", amount));
  EXPECT_FALSE(r.id("b", id));
  EXPECT_EQ(r.error, "a must be between 1 and 10^15");
}

TEST(OnlyFields, NamesTheFirstUnknownField) {
  std::string unknown;
  EXPECT_TRUE(only_fields(json{{"a", 1}, {"b", 2}}, {"a", "b", "c"}, unknown));
  EXPECT_FALSE(only_fields(json{{"a", 1}, {"z", 2}}, {"a"}, unknown));
  EXPECT_EQ(unknown, "z");
  // A field named "" is named too: callers test `unknown` for emptiness.
  EXPECT_FALSE(only_fields(json{{"", 1}}, {"a"}, unknown));
  EXPECT_FALSE(unknown.empty());
}

TEST(Canonical, LengthPrefixKeepsFieldBoundaries) {
  std::string ab_c, a_bc;
  append_canonical(ab_c, "ab");
  append_canonical(ab_c, "c");
  append_canonical(a_bc, "a");
  append_canonical(a_bc, "bc");
  EXPECT_EQ(ab_c, "2:ab;1:c;");
  EXPECT_NE(ab_c, a_bc);
}

}  // namespace
}  // namespace tally::validate
