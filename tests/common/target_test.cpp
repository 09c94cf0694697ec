// Request targets: segments and query values are percent-decoded, so every
// client's spelling of an id names the same id; what is not an escape is
// left for the callers' checks to refuse.
#include "common/http/target.hpp"

#include "common/http/route_match.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tally::http {
namespace {

using testing::ElementsAre;

TEST(Target, SplitsPathAndQueryAndSkipsEmptySegments) {
  auto t = split_target("//v1/accounts//acc-1/?limit=5&after=9");
  EXPECT_THAT(t.path, ElementsAre("v1", "accounts", "acc-1"));
  EXPECT_EQ(t.query, "limit=5&after=9");
  EXPECT_TRUE(split_target("/").path.empty());
  EXPECT_TRUE(split_target("").query.empty());
}

TEST(Target, DecodesPathSegments) {
  auto t = split_target("/v1/accounts/team%3Aacc-1/entries");
  EXPECT_THAT(t.path, ElementsAre("v1", "accounts", "team:acc-1", "entries"));
  // An encoded slash is part of its segment, not a separator.
  EXPECT_THAT(split_target("/a%2Fb/c").path, ElementsAre("a/b", "c"));
  // '+' is a plus sign in a path.
  EXPECT_THAT(split_target("/a+b").path, ElementsAre("a+b"));
}

TEST(Target, KeepsWhatIsNotAnEscapeAsSent) {
  EXPECT_THAT(split_target("/v1/accounts/acc%2").path, ElementsAre("v1", "accounts", "acc%2"));
  EXPECT_THAT(split_target("/v1/accounts/acc%zz").path, ElementsAre("v1", "accounts", "acc%zz"));
  EXPECT_EQ(query_param("biz_id=a%g1", "biz_id"), "a%g1");
}

TEST(Target, QueryValuesAreDecodedWithPlusAsSpace) {
  EXPECT_EQ(query_param("biz_id=order%3A42&limit=5", "biz_id"), "order:42");
  EXPECT_EQ(query_param("q=a+b%2Bc", "q"), "a b+c");
  EXPECT_EQ(query_param("limit=5&limit=6", "limit"), "5");  // the first one counts
  EXPECT_EQ(query_param("strong&limit=5", "strong"), "");
  EXPECT_EQ(query_param("limit=5", "after"), std::nullopt);
  EXPECT_EQ(query_param("", "limit"), std::nullopt);
}

TEST(Target, EncodedSegmentIsTheInverseOfDecoding) {
  for (const std::string s : {"acc-1", "team:acc-1", "a/b", "a b", "100%", "a?b#c", "ü"}) {
    auto encoded = encoded_segment(s);
    EXPECT_EQ(encoded.find_first_of("/?# "), std::string::npos) << encoded;
    EXPECT_THAT(split_target("/" + encoded).path, ElementsAre(s)) << encoded;
  }
  EXPECT_EQ(encoded_segment("team:acc-1"), "team:acc-1");  // ':' may stay in a segment
}

TEST(Target, ToIntTakesWholeDecimalIntegersOnly) {
  EXPECT_EQ(to_int("42"), 42);
  EXPECT_EQ(to_int("-1"), -1);
  EXPECT_EQ(to_int("4x"), std::nullopt);
  EXPECT_EQ(to_int(""), std::nullopt);
  EXPECT_EQ(to_int("99999999999999999999"), std::nullopt);
}

TEST(RouteMatch, LiteralsMatchExactlyAndParametersTakeOneSegment) {
  using args = std::vector<std::string>;
  EXPECT_EQ(match_path("/v1/accounts/{id}/entries", {"v1", "accounts", "a:1", "entries"}), args{"a:1"});
  EXPECT_EQ(match_path("/v1/accounts", {"v1", "accounts"}), args{});
  EXPECT_EQ(match_path("/v1/sagas/{id}/{action}", {"v1", "sagas", "sg_1", "retry"}), (args{"sg_1", "retry"}));
  EXPECT_FALSE(match_path("/v1/accounts/{id}", {"v1", "accounts"}));
  EXPECT_FALSE(match_path("/v1/accounts/{id}", {"v1", "accounts", "a", "entries"}));
  EXPECT_FALSE(match_path("/v1/accounts/{id}", {"v1", "account", "a"}));
  EXPECT_FALSE(match_path("/v1", {}));
  EXPECT_EQ(match_path("/", {}), args{});
}

TEST(RouteMatch, ALastRestParameterTakesEveryRemainingSegment) {
  using args = std::vector<std::string>;
  EXPECT_EQ(match_path("/console/{file...}", {"console", "js", "app.js"}), args{"js/app.js"});
  EXPECT_EQ(match_path("/console/{file...}", {"console", "index.html"}), args{"index.html"});
  EXPECT_FALSE(match_path("/console/{file...}", {"console"}));
}

}  // namespace
}  // namespace tally::http
