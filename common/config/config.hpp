#pragma once
// Service configuration: a JSON file, then environment overrides, then
// command-line overrides. A key path "a.b_c" is overridden by the environment
// variable PREFIX_A_B_C (PREFIX given at load, e.g. "TALLY_SHARD").
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tally::config {

class config {
 public:
  // Reads `file` when non-empty (throws std::runtime_error with the path and
  // the parse error on failure), applies `--key.path=value` arguments from
  // argv, and resolves environment overrides lazily in the getters.
  static config load(std::string env_prefix, const std::string& file, const std::vector<std::string>& overrides = {});
  // Parses argv: `--config=FILE` selects the file, every other `--a.b=v`
  // (or `--a-b=v`, dashes mapped to underscores) is an override.
  static config from_args(std::string env_prefix, int argc, char** argv);

  std::string get_string(std::string_view path, std::string_view fallback) const;
  std::int64_t get_int(std::string_view path, std::int64_t fallback) const;
  bool get_bool(std::string_view path, bool fallback) const;
  std::optional<std::string> find(std::string_view path) const;  // raw value as text
  // A secret (a token) of at least `min_length` characters; throws naming
  // the setting and its environment variable, never the value.
  std::string get_secret(std::string_view path, std::size_t min_length) const;
  std::string env_name(std::string_view path) const;  // PREFIX_A_B_C

 private:
  struct value {
    std::string text;
    std::string source;  // where the value came from, for error messages
  };
  std::optional<value> lookup(std::string_view path) const;

  std::string prefix_;
  nlohmann::json root_;
  std::string file_;
  std::map<std::string, std::string, std::less<>> overrides_;  // path → text, from the command line
};

}  // namespace tally::config
