#include "common/config/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace tally::config {
namespace {

using json = nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// A JSON string is used as-is; any other value as its JSON text, so a number
// in the file reads the same as the same number in the environment.
std::string as_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

const json* find_in(const json& root, std::string_view path) {
  const json* node = &root;
  while (true) {
    const auto dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (!node->is_object()) return nullptr;
    const auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    path.remove_prefix(dot + 1);
  }
}

json read_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("config: cannot open " + file);
  try {
    json root = json::parse(in);
    if (!root.is_object()) throw std::runtime_error("config: " + file + ": top level must be a JSON object");
    return root;
  } catch (const json::parse_error& e) {
    throw std::runtime_error("config: " + file + ": " + e.what());
  }
}

// "--a-b.c=v" → {"a_b.c", "v"}; the leading dashes are optional here so that
// load() can take overrides written either way.
std::pair<std::string, std::string> split_override(const std::string_view given) {
  std::string_view arg = given;
  if (arg.substr(0, 2) == "--") arg.remove_prefix(2);
  const auto eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw std::runtime_error("config: override '" + std::string(given) + "' is not of the form --key.path=value");
  std::string key(arg.substr(0, eq));
  std::replace(key.begin(), key.end(), '-', '_');
  return {key, std::string(arg.substr(eq + 1))};
}

}  // namespace

config config::load(std::string env_prefix, const std::string& file, const std::vector<std::string>& overrides) {
  config c;
  c.prefix_ = std::move(env_prefix);
  c.file_ = file;
  c.root_ = file.empty() ? json::object() : read_file(file);
  for (const auto& o : overrides) {
    auto [key, text] = split_override(o);
    c.overrides_.insert_or_assign(std::move(key), std::move(text));  // a later repeat wins, as in most CLIs
  }
  return c;
}

config config::from_args(std::string env_prefix, int argc, char** argv) {
  std::string file;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    // Positional words (a subcommand such as "migrate") belong to the caller.
    if (arg.substr(0, 2) != "--") continue;
    if (arg.substr(0, 9) == "--config=") {
      file = std::string(arg.substr(9));
      continue;
    }
    if (arg == "--config") throw std::runtime_error("config: use --config=FILE");
    overrides.emplace_back(arg);
  }
  return load(std::move(env_prefix), file, overrides);
}

std::string config::env_name(std::string_view path) const {
  std::string name = prefix_.empty() ? "" : prefix_ + "_";
  for (const char ch : path) {
    const bool separator = ch == '.' || ch == '-';
    name += separator ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return name;
}

std::optional<config::value> config::lookup(std::string_view path) const {
  if (const auto it = overrides_.find(path); it != overrides_.end())
    return value{it->second, "command line --" + std::string(path)};
  const std::string env = env_name(path);
  // An empty variable counts as unset: shells and compose files produce them
  // for "not configured".
  if (const char* e = std::getenv(env.c_str()); e && *e) return value{e, "environment " + env};
  // null in the file means "use the default", the usual JSON reading.
  if (const json* v = find_in(root_, path); v && !v->is_null())
    return value{as_text(*v), "file " + file_ + " key " + std::string(path)};
  return std::nullopt;
}

std::optional<std::string> config::find(std::string_view path) const {
  auto v = lookup(path);
  if (!v) return std::nullopt;
  return std::move(v->text);
}

std::string config::get_secret(std::string_view path, std::size_t min_length) const {
  auto v = get_string(path, "");
  if (v.size() < min_length)
    throw std::runtime_error(std::string(path) + " of at least " + std::to_string(min_length) +
                             " characters is required (" + env_name(path) + ")");
  return v;
}

std::string config::get_string(std::string_view path, std::string_view fallback) const {
  auto v = lookup(path);
  return v ? std::move(v->text) : std::string(fallback);
}

std::int64_t config::get_int(std::string_view path, std::int64_t fallback) const {
  const auto v = lookup(path);
  if (!v) return fallback;
  std::string_view digits = v->text;
  if (digits.substr(0, 1) == "+") digits.remove_prefix(1);  // from_chars takes '-' but not '+'
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
    throw std::runtime_error("config: " + std::string(path) + " must be an integer, got '" + v->text + "' from " +
                             v->source);
  return out;
}

bool config::get_bool(std::string_view path, bool fallback) const {
  const auto v = lookup(path);
  if (!v) return fallback;
  const std::string t = lower(v->text);
  if (t == "true" || t == "1" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "no") return false;
  throw std::runtime_error("config: " + std::string(path) + " must be true/false/1/0/yes/no, got '" + v->text +
                           "' from " + v->source);
}

}  // namespace tally::config
