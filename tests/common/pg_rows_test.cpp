// Rows sent as one array parameter per column (common/pg/rows.hpp).
#include "common/pg/rows.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tally::pg {
namespace {

enum class colour { red, blue };
std::string_view name_of(colour c) { return c == colour::red ? "red" : "blue"; }

struct item {
  std::string name;
  std::int64_t count = 0;
  colour tint = colour::red;
  std::optional<std::int64_t> limit;
  auto operator<=>(const item&) const = default;
};

constexpr auto item_columns =
    std::tuple{&item::name, &item::count, [](const item& i) { return name_of(i.tint); },
               [](const item& i) { return i.limit ? param{std::to_string(*i.limit)} : param{}; }};

TEST(ArraysOf, OneArrayPerColumnInTheTuplesOrder) {
  std::vector<item> rows{{"a\"b", 1, colour::red, 5}, {"c", -2, colour::blue, std::nullopt}};
  auto params = arrays_of(rows, item_columns);
  EXPECT_EQ(params, (std::vector<param>{R"({"a\"b","c"})", "{1,-2}", R"({"red","blue"})", R"({"5",NULL})"}));
}

TEST(ArraysOf, TakesPointersAndOrderedSets) {
  std::set<item> sorted{{"b", 2, colour::red, {}}, {"a", 1, colour::red, {}}};
  std::vector<const item*> pointers;
  for (const auto& i : sorted) pointers.push_back(&i);
  const auto columns = std::tuple{&item::name, &item::count};
  EXPECT_EQ(arrays_of(sorted, columns), (std::vector<param>{R"({"a","b"})", "{1,2}"}));
  EXPECT_EQ(arrays_of(pointers, columns), arrays_of(sorted, columns));
}

TEST(ArraysOf, NoRowsGiveEmptyArrays) {
  std::vector<item> none;
  EXPECT_EQ(arrays_of(none, item_columns), (std::vector<param>{"{}", "{}", "{}", "{}"}));
}

}  // namespace
}  // namespace tally::pg
