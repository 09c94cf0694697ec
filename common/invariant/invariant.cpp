#include "common/invariant/invariant.hpp"

#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace tally::invariant {

void broken(const char* condition, const char* file, int line, const char* names, const std::string& values) {
  const nlohmann::json report{
      {"level", "fatal"}, {"msg", "invariant broken"}, {"condition", condition}, {"file", file}, {"line", line},
      {"names", names},   {"values", values}};
  const auto text = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tally::invariant
