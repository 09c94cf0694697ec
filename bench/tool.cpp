#include "bench/tool.hpp"

#include <cstdio>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::bench {

namespace {

// "--name=value" arguments as (name, value) pairs; anything else is an error.
std::vector<std::pair<std::string, std::string>> split_flags(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto eq = arg.find('=');
    if (!arg.starts_with("--") || eq == std::string_view::npos)
      throw std::invalid_argument("arguments are --name=value, got " + std::string(arg));
    out.emplace_back(std::string(arg.substr(2, eq - 2)), std::string(arg.substr(eq + 1)));
  }
  return out;
}

void set_option(std::string& option, const std::string& value) { option = value; }
void set_option(std::uint16_t& option, const std::string& value) {
  option = static_cast<std::uint16_t>(std::stoul(value));
}
void set_option(int& option, const std::string& value) { option = std::stoi(value); }
void set_option(std::size_t& option, const std::string& value) { option = std::stoul(value); }
void set_option(double& option, const std::string& value) { option = std::stod(value); }

}  // namespace

flag_table load_flags(load_options& o) {
  return {{"connections", &o.connections}, {"threads", &o.threads}, {"duration", &o.duration_s},
          {"warmup", &o.warmup_s},         {"rate", &o.rate},       {"units", &o.units}};
}

void read_flags(int argc, char** argv, const flag_table& flags) {
  for (const auto& [name, value] : split_flags(argc, argv)) {
    auto flag = flags.find(name);
    if (flag == flags.end()) throw std::invalid_argument("unknown option --" + name);
    std::visit([&value](auto* option) { set_option(*option, value); }, flag->second);
  }
}

int run_tool(const char* name, const std::function<nlohmann::json()>& body) {
  try {
    const auto summary = body();
    std::cout << summary.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace tally::bench
