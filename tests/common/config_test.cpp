#include "common/config/config.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace {

using tally::config::config;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A config file that lives as long as the test.
class temp_file {
 public:
  explicit temp_file(const std::string& text)
      : path_(::testing::TempDir() + "config_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_++)) {
    std::ofstream(path_) << text;
  }
  ~temp_file() { std::remove(path_.c_str()); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline int next_ = 0;
  std::string path_;
};

// Sets an environment variable for the scope of a test.
class scoped_env {
 public:
  scoped_env(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~scoped_env() { ::unsetenv(name_.c_str()); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
};

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no exception)";
}

const char* const sample = R"({
  "http": {"port": 8080, "bind_address": "127.0.0.1"},
  "pg": {"pool_size": 16, "pipeline": true, "timeout_ms": 2.5, "note": null},
  "name": "shard-1"
})";

TEST(config_test, reads_nested_values_from_the_file) {
  temp_file f(sample);
  const auto c = config::load("TCFG_A", f.path());
  EXPECT_EQ(c.get_int("http.port", 0), 8080);
  EXPECT_EQ(c.get_string("http.bind_address", ""), "127.0.0.1");
  EXPECT_EQ(c.get_string("name", ""), "shard-1");
  EXPECT_TRUE(c.get_bool("pg.pipeline", false));
  EXPECT_EQ(c.find("pg.pool_size"), "16");
}

TEST(config_test, missing_and_null_keys_fall_back) {
  temp_file f(sample);
  const auto c = config::load("TCFG_B", f.path());
  EXPECT_EQ(c.get_int("http.missing", 7), 7);
  EXPECT_EQ(c.get_string("pg.note", "dflt"), "dflt");
  EXPECT_FALSE(c.find("nothing.here").has_value());
  EXPECT_FALSE(c.find("name.deeper").has_value());  // a path through a string is absent, not an error
  EXPECT_TRUE(c.get_bool("no.such.flag", true));
}

TEST(config_test, no_file_means_only_env_and_overrides) {
  const auto c = config::load("TCFG_C", "");
  EXPECT_EQ(c.get_int("x", 3), 3);
}

TEST(config_test, env_name_uppercases_and_maps_dots) {
  const auto c = config::load("TALLY_SHARD", "");
  EXPECT_EQ(c.env_name("a.b_c"), "TALLY_SHARD_A_B_C");
  EXPECT_EQ(c.env_name("http.port"), "TALLY_SHARD_HTTP_PORT");
  EXPECT_EQ(config::load("", "").env_name("pg.host"), "PG_HOST");
}

TEST(config_test, precedence_is_command_line_then_env_then_file) {
  temp_file f(sample);
  scoped_env port("TCFG_D_HTTP_PORT", "9000");
  scoped_env name("TCFG_D_NAME", "from-env");
  const auto c = config::load("TCFG_D", f.path(), {"--http.port=9100"});
  EXPECT_EQ(c.get_int("http.port", 0), 9100);       // command line beats env and file
  EXPECT_EQ(c.get_string("name", ""), "from-env");  // env beats file
  EXPECT_EQ(c.get_int("pg.pool_size", 0), 16);      // file beats fallback
}

TEST(config_test, empty_environment_variable_counts_as_unset) {
  temp_file f(sample);
  scoped_env empty("TCFG_E_NAME", "");
  EXPECT_EQ(config::load("TCFG_E", f.path()).get_string("name", ""), "shard-1");
}

TEST(config_test, from_args_takes_config_file_and_overrides) {
  temp_file f(sample);
  std::vector<std::string> args = {
      "shard", "migrate", "--config=" + f.path(), "--http-port=1234", "--pg.pool_size=4", "--pg.pool_size=5"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const auto c = config::from_args("TCFG_F", static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(c.get_int("http_port", 0), 1234);  // dashes are underscores
  EXPECT_EQ(c.get_int("pg.pool_size", 0), 5);  // the last repeat wins
  EXPECT_EQ(c.get_string("name", ""), "shard-1");
}

TEST(config_test, malformed_arguments_are_rejected) {
  std::vector<std::string> args = {"shard", "--verbose"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_THAT(what_of([&] { config::from_args("TCFG_G", 2, argv.data()); }), HasSubstr("--verbose"));
  args = {"shard", "--config", "x.json"};
  argv.clear();
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_THAT(what_of([&] { config::from_args("TCFG_G", 3, argv.data()); }), HasSubstr("--config=FILE"));
}

TEST(config_test, get_int_rejects_non_integers_naming_key_and_source) {
  temp_file f(sample);
  scoped_env env("TCFG_H_HTTP_PORT", "80x");
  const auto from_env = config::load("TCFG_H", f.path());
  EXPECT_THAT(what_of([&] { (void)from_env.get_int("http.port", 0); }),
              AllOf(HasSubstr("http.port"), HasSubstr("80x"), HasSubstr("environment TCFG_H_HTTP_PORT")));
  EXPECT_THAT(what_of([&] { (void)from_env.get_int("pg.timeout_ms", 0); }),
              AllOf(HasSubstr("pg.timeout_ms"), HasSubstr("file " + f.path())));
  EXPECT_THAT(what_of([&] { (void)from_env.get_int("pg.pipeline", 0); }), HasSubstr("pg.pipeline"));
  EXPECT_THAT(what_of([&] { (void)from_env.get_int("name", 0); }), HasSubstr("must be an integer"));

  const auto from_cli = config::load("TCFG_H2", "", {"--n=", "--big=99999999999999999999"});
  EXPECT_THAT(what_of([&] { (void)from_cli.get_int("n", 0); }), HasSubstr("command line --n"));
  EXPECT_THAT(what_of([&] { (void)from_cli.get_int("big", 0); }), HasSubstr("big"));
}

TEST(config_test, get_int_accepts_signs_and_strings_holding_integers) {
  const auto c = config::load("TCFG_I", "", {"--a=-42", "--b=+7"});
  EXPECT_EQ(c.get_int("a", 0), -42);
  EXPECT_EQ(c.get_int("b", 0), 7);
  temp_file f(R"({"port": "5432"})");
  EXPECT_EQ(config::load("TCFG_I", f.path()).get_int("port", 0), 5432);
}

TEST(config_test, get_bool_accepts_the_usual_spellings) {
  const auto c =
      config::load("TCFG_J", "", {"--a=true", "--b=FALSE", "--c=1", "--d=0", "--e=yes", "--f=No", "--g=maybe"});
  EXPECT_TRUE(c.get_bool("a", false));
  EXPECT_FALSE(c.get_bool("b", true));
  EXPECT_TRUE(c.get_bool("c", false));
  EXPECT_FALSE(c.get_bool("d", true));
  EXPECT_TRUE(c.get_bool("e", false));
  EXPECT_FALSE(c.get_bool("f", true));
  EXPECT_THAT(what_of([&] { (void)c.get_bool("g", false); }), AllOf(HasSubstr("g"), HasSubstr("maybe")));
}

TEST(config_test, bad_files_throw_with_the_path) {
  temp_file broken(R"({"a": )");
  EXPECT_THAT(what_of([&] { config::load("TCFG_K", broken.path()); }), HasSubstr(broken.path()));
  temp_file array("[1, 2]");
  EXPECT_THAT(what_of([&] { config::load("TCFG_K", array.path()); }), HasSubstr("JSON object"));
  EXPECT_THAT(what_of([&] { config::load("TCFG_K", "/nonexistent/tally.json"); }),
              HasSubstr("/nonexistent/tally.json"));
}

TEST(config_test, non_string_values_are_found_as_json_text) {
  temp_file f(R"({"list": [1, 2], "flag": false})");
  const auto c = config::load("TCFG_L", f.path());
  EXPECT_EQ(c.find("list"), "[1,2]");
  EXPECT_EQ(c.find("flag"), "false");
}

}  // namespace
