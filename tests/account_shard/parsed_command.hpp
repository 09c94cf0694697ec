#pragma once
// The unit tests' way to a command: its JSON, as the orchestrator sends it,
// through parse_command.
#include <variant>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "account_shard/ledger/command.hpp"

namespace tally::test {

// The parsed command, or a test failure naming the parse error (and an empty command).
inline shard::command parsed(const nlohmann::json& j) {
  auto r = shard::parse_command(j);
  if (auto* bad = std::get_if<shard::invalid_command>(&r)) {
    ADD_FAILURE() << "unexpected parse error: " << bad->message << " for " << j.dump();
    return {};
  }
  return std::get<shard::command>(r);
}

}  // namespace tally::test
