#include "common/log/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using json = nlohmann::json;
namespace log = tally::log;

// Points fd 2 at a temporary file for the lifetime of the object, so the test
// sees exactly the bytes the logger writes with write(2).
class stderr_capture {
 public:
  stderr_capture() {
    path_ = ::testing::TempDir() + "log_test_XXXXXX";
    const int fd = ::mkstemp(path_.data());
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~stderr_capture() {
    restore();
    std::remove(path_.c_str());
  }
  stderr_capture(const stderr_capture&) = delete;
  stderr_capture& operator=(const stderr_capture&) = delete;

  std::vector<std::string> lines() {
    restore();
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

class log_test : public ::testing::Test {
 protected:
  void SetUp() override { log::init("unit", log::level::debug); }
  void TearDown() override { log::init("unit", log::level::info); }
};

TEST_F(log_test, writes_one_json_object_per_line_with_core_fields) {
  stderr_capture cap;
  log::info("shard started", {{"port", 8080}});
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  const json j = json::parse(lines[0]);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["service"], "unit");
  EXPECT_EQ(j["msg"], "shard started");
  EXPECT_EQ(j["port"], 8080);
  const std::regex rfc3339(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(), rfc3339)) << j["ts"];
  // The documented order: ts, level, service, msg, then the fields.
  EXPECT_EQ(lines[0].rfind(R"({"ts":")", 0), 0u);
  EXPECT_LT(lines[0].find(R"("level")"), lines[0].find(R"("service")"));
  EXPECT_LT(lines[0].find(R"("service")"), lines[0].find(R"("msg")"));
}

TEST_F(log_test, redacts_secret_like_names_at_every_depth) {
  stderr_capture cap;
  log::warn("connect", {{"password", "hunter2"},
                        {"Auth_Token", "abc"},
                        {"db", {{"host", "127.0.0.1"}, {"client_secret", "s3"}, {"creds", {{"api_key", "k"}}}}},
                        {"peers", json::array({{{"token", "t"}, {"name", "a"}}})}});
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  const json j = json::parse(lines[0]);
  EXPECT_EQ(j["password"], "***");
  EXPECT_EQ(j["Auth_Token"], "***");
  EXPECT_EQ(j["db"]["host"], "127.0.0.1");
  EXPECT_EQ(j["db"]["client_secret"], "***");
  EXPECT_EQ(j["db"]["creds"]["api_key"], "***");
  EXPECT_EQ(j["peers"][0]["token"], "***");
  EXPECT_EQ(j["peers"][0]["name"], "a");
  for (const char* secret : {"hunter2", "abc", "s3", "\"k\"", "\"t\""})
    EXPECT_EQ(lines[0].find(secret), std::string::npos) << secret;
}

TEST_F(log_test, a_secret_named_object_is_hidden_whole) {
  stderr_capture cap;
  log::info("x", {{"secrets", {{"a", 1}}}});
  const json j = json::parse(cap.lines().at(0));
  EXPECT_EQ(j["secrets"], "***");
}

TEST_F(log_test, drops_lines_below_the_minimum_level) {
  log::init("unit", log::level::warn);
  stderr_capture cap;
  log::debug("no");
  log::info("no");
  log::warn("yes");
  log::error("yes too");
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0])["level"], "warn");
  EXPECT_EQ(json::parse(lines[1])["level"], "error");
}

TEST_F(log_test, fields_cannot_overwrite_core_keys) {
  stderr_capture cap;
  log::info("real", {{"msg", "fake"}, {"level", "error"}});
  const json j = json::parse(cap.lines().at(0));
  EXPECT_EQ(j["msg"], "real");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["field_msg"], "fake");
  EXPECT_EQ(j["field_level"], "error");
}

TEST_F(log_test, invalid_utf8_is_replaced_not_thrown) {
  stderr_capture cap;
  EXPECT_NO_THROW(log::info("bad \xff byte", {{"v", "\xc3"}}));
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(json::accept(lines[0]));
}

TEST_F(log_test, lines_from_many_threads_never_interleave) {
  constexpr int threads = 4;
  constexpr int per_thread = 250;
  stderr_capture cap;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([t] {
      for (int i = 0; i < per_thread; ++i) log::info("tick", {{"thread", t}, {"i", i}, {"pad", std::string(200, 'x')}});
    });
  for (auto& w : workers) w.join();
  const auto lines = cap.lines();
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(threads * per_thread));
  for (const auto& line : lines) ASSERT_EQ(json::parse(line)["msg"], "tick");
}

TEST(log_parse_level, maps_names_and_defaults_to_info) {
  EXPECT_EQ(log::parse_level("debug"), log::level::debug);
  EXPECT_EQ(log::parse_level("INFO"), log::level::info);
  EXPECT_EQ(log::parse_level("warn"), log::level::warn);
  EXPECT_EQ(log::parse_level("warning"), log::level::warn);
  EXPECT_EQ(log::parse_level("error"), log::level::error);
  EXPECT_EQ(log::parse_level("loud"), log::level::info);
  EXPECT_EQ(log::parse_level(""), log::level::info);
}

}  // namespace
