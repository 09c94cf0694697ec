#pragma once
// tallyctl's commands as a table: a row a command, with its place (the
// groups it sits in, then its name), its help, how its options are declared
// and the function that runs it. main() builds the command line from the
// rows, in their order, and runs the one the arguments name.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gateway/tallyctl/command_line.hpp"

namespace CLI {
class App;
}

namespace tally::ctl {

// Every command's options: each command's declare binds its own, and only
// the command that runs reads them.
struct arguments {
  struct {
    std::string state, type, biz_id, account, created_after, created_before, cursor;
    std::optional<std::int64_t> older_than_ms, limit;
    bool overdue = false, oldest_first = false;
  } list;  // sagas list
  std::string saga_id;
  struct {
    std::string id, lot_state = "open";
    bool strong = false;
    std::optional<std::int64_t> limit, after;
  } account;  // accounts ...
  struct {
    std::string account, from, to, biz_id, memo, expires_at, rule_version, original;
    std::int64_t amount = 0;
    std::optional<std::int64_t> hold_timeout_ms, timeout_ms, refund_amount;
  } write;  // credit, deduct, transfer, refund
  struct {
    std::int64_t shard = 0, audit_id = 0;
    std::optional<std::int64_t> reports_limit;
    bool full = false, no_freeze = false;
  } reconcile;  // reconcile ...
};

struct command {
  std::string_view path;  // e.g. "reconcile audit start": its groups, then its name
  std::string_view help;
  void (*declare)(CLI::App& cmd, arguments& a);
  int (*run)(const command_line& cl, const arguments& a);
};

// A group of commands (e.g. "sagas", "reconcile audit"), which needs one of them.
struct command_group {
  std::string_view path;
  std::string_view help;
};

std::span<const command> commands();
std::span<const command_group> command_groups();

}  // namespace tally::ctl
