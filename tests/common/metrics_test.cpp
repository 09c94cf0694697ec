#include "common/metrics/metrics.hpp"
#include "common/metrics/scrape.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using namespace tally::metrics;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(metrics_test, counter_renders_with_help_and_type) {
  registry r;
  auto& c = r.add_counter("tally_requests_total", "Requests served.");
  c.inc();
  c.inc(4);
  EXPECT_EQ(c.value(), 5u);
  EXPECT_EQ(r.render(),
            "# HELP tally_requests_total Requests served.\n"
            "# TYPE tally_requests_total counter\n"
            "tally_requests_total 5\n");
}

TEST(metrics_test, same_name_and_labels_is_the_same_metric) {
  registry r;
  auto& a = r.add_counter("x_total", "X.", R"(mode="group")");
  auto& b = r.add_counter("x_total", "X.", R"(mode="group")");
  auto& other = r.add_counter("x_total", "X.", R"(mode="single")");
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
}

TEST(metrics_test, help_and_type_once_per_name_with_series_kept_together) {
  registry r;
  r.add_counter("a_total", "A.", R"(mode="group")").inc(2);
  r.add_gauge("b", "B.").set(1.5);
  r.add_counter("a_total", "A.", R"(mode="single")").inc(3);
  const std::string text = r.render();
  EXPECT_EQ(occurrences(text, "# HELP a_total"), 1u);
  EXPECT_EQ(occurrences(text, "# TYPE a_total counter"), 1u);
  // A name's series follow its TYPE line, before the next name's.
  const auto type_a = text.find("# TYPE a_total counter\n"), type_b = text.find("# TYPE b gauge\n");
  for (const char* series : {"a_total{mode=\"group\"} 2\n", "a_total{mode=\"single\"} 3\n"}) {
    const auto at = text.find(series);
    ASSERT_NE(at, std::string::npos) << series << text;
    EXPECT_GT(at, type_a);
    EXPECT_LT(at, type_b);
  }
  EXPECT_THAT(text, HasSubstr("# TYPE b gauge\nb 1.5\n"));
}

TEST(metrics_test, histogram_buckets_are_cumulative_with_inf_sum_and_count) {
  registry r;
  auto& h = r.add_histogram("lat_seconds", "Latency.", {0.1, 0.5, 1}, R"(op="hold")");
  for (const double v : {0.05, 0.1, 0.3, 0.7, 2.0, 3.0}) h.observe(v);
  EXPECT_THAT(h.bucket_counts(), ElementsAre(2u, 1u, 1u, 2u));  // 0.1 falls in le="0.1": bounds are inclusive
  EXPECT_EQ(h.count(), 6u);
  EXPECT_DOUBLE_EQ(h.sum(), 6.15);
  const auto text = r.render();
  EXPECT_THAT(text, HasSubstr("# TYPE lat_seconds histogram\n"));
  for (const char* line :
       {"lat_seconds_bucket{op=\"hold\",le=\"0.1\"} 2\n", "lat_seconds_bucket{op=\"hold\",le=\"0.5\"} 3\n",
        "lat_seconds_bucket{op=\"hold\",le=\"1\"} 4\n", "lat_seconds_bucket{op=\"hold\",le=\"+Inf\"} 6\n",
        "lat_seconds_sum{op=\"hold\"} 6.15\n", "lat_seconds_count{op=\"hold\"} 6\n"})
    EXPECT_THAT(text, HasSubstr(line));
}

TEST(metrics_test, unlabelled_histogram_has_only_le) {
  registry r;
  r.add_histogram("h", "H.", {1}).observe(0.5);
  const std::string text = r.render();
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("h_sum 0.5\n"));
  EXPECT_THAT(text, HasSubstr("h_count 1\n"));
}

TEST(metrics_test, histogram_ignores_nan_and_rejects_bad_bounds) {
  histogram h({1, 2});
  h.observe(std::nan(""));
  EXPECT_EQ(h.count(), 0u);
  EXPECT_THROW(histogram({2, 1}), std::invalid_argument);
  EXPECT_THROW(histogram({1, 1}), std::invalid_argument);
  EXPECT_THROW(histogram({1, std::numeric_limits<double>::infinity()}), std::invalid_argument);
}

TEST(metrics_test, gauge_values_use_prometheus_spellings) {
  registry r;
  auto& g = r.add_gauge("g", "G.");
  g.set(-std::numeric_limits<double>::infinity());
  EXPECT_THAT(r.render(), HasSubstr("g -Inf\n"));
  g.set(0.0005);
  EXPECT_THAT(r.render(), HasSubstr("g 0.0005\n"));
  g.set(42);
  EXPECT_THAT(r.render(), HasSubstr("g 42\n"));
}

// prometheus-cpp writes HELP as given: a line break would end it early.
TEST(metrics_test, help_text_is_one_line) {
  registry r;
  EXPECT_THROW(r.add_counter("c_total", "line one\nline two"), std::invalid_argument);
  EXPECT_THROW(r.add_counter("c_total", "back\\slash"), std::invalid_argument);
  EXPECT_THAT(r.render(), testing::Not(HasSubstr("c_total")));
}

TEST(metrics_test, registration_errors_are_reported) {
  registry r;
  r.add_counter("m", "M.");
  EXPECT_THROW(r.add_gauge("m", "M.", R"(x="1")"), std::invalid_argument);  // one name, one type
  EXPECT_THROW(r.add_counter("1bad", "B."), std::invalid_argument);
  EXPECT_THROW(r.add_counter("bad-name", "B."), std::invalid_argument);
  EXPECT_THROW(r.add_counter("", "B."), std::invalid_argument);
}

TEST(metrics_test, concurrent_registration_and_updates) {
  constexpr int threads = 4;
  constexpr int names = 20;
  constexpr int incs = 10000;
  registry r;
  std::vector<std::vector<counter*>> seen(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int n = 0; n < names; ++n) seen[t].push_back(&r.add_counter("c" + std::to_string(n) + "_total", "C."));
      auto& h = r.add_histogram("shared_seconds", "S.", latency_bounds());
      for (int i = 0; i < incs; ++i) {
        seen[t][static_cast<std::size_t>(i % names)]->inc();
        h.observe(0.001);
      }
    });
  for (auto& w : workers) w.join();
  for (int t = 1; t < threads; ++t) EXPECT_EQ(seen[t], seen[0]);  // every thread got the same metrics
  for (const counter* c : seen[0]) EXPECT_EQ(c->value(), static_cast<std::uint64_t>(threads * incs / names));
  const std::string text = r.render();
  EXPECT_EQ(occurrences(text, "# TYPE"), static_cast<std::size_t>(names + 1));
  EXPECT_THAT(text, HasSubstr("shared_seconds_count " + std::to_string(threads * incs) + "\n"));
}

TEST(metrics_test, latency_bounds_span_half_a_millisecond_to_ten_seconds) {
  const auto b = latency_bounds();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 0.0005);
  EXPECT_DOUBLE_EQ(b.back(), 10);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_NO_THROW(histogram{b});
}

}  // namespace

namespace {

TEST(metrics_scrape, sums_or_takes_the_largest_sample_of_a_metric_whatever_its_labels) {
  registry r;
  r.add_counter("tally_x_total", "x", R"(state="a")").inc(3);
  r.add_counter("tally_x_total", "x", R"(state="b c")").inc(4);
  r.add_counter("tally_x_total_more", "a longer name").inc(100);
  r.add_gauge("tally_lag_seconds", "lag", R"(source="s0")").set(2.5);
  r.add_gauge("tally_lag_seconds", "lag", R"(source="s1")").set(0.5);
  const auto text = r.render();
  EXPECT_EQ(sample_sum(text, "tally_x_total"), 7);
  EXPECT_EQ(sample_max(text, "tally_lag_seconds"), 2.5);
  EXPECT_EQ(sample_sum(text, "tally_missing"), std::nullopt);
  EXPECT_EQ(sample_sum("tally_y 1 1700000000000\nbroken{ 2\ntally_y{a=\"1\"} x\n", "tally_y"), 1);
}

}  // namespace
