#pragma once
// What the gateway checks before it forwards anything (pure, and the fuzz
// target's entry point): the body of every write and the query parameters
// of every read, against API.md. A saga write is validated once, here, into
// the contract's request (common/contract), which the gateway forwards in
// its canonical form: the orchestrator does not validate it again.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/contract/saga_request.hpp"

namespace tally::gateway {

enum class write_kind { open_account, credit, deduct, refund, transfer, batch_deduct };

// The collection in POST /v1/{collection}; nullopt for any other.
std::optional<write_kind> write_of_collection(std::string_view collection);

struct accepted_write {
  std::vector<std::string> accounts;           // the accounts it names, for the per-account rate limit
  std::string account_id;                      // open_account: the account to open
  std::optional<contract::saga_request> saga;  // every other write
};

struct refusal {
  std::string message;
};

std::variant<accepted_write, refusal> check_write(write_kind kind, std::string_view tenant, std::string_view body);

// Query parameters, each nullopt when absent and a refusal when malformed.
struct read_params {
  std::optional<std::int64_t> wait_ms;  // 0..30000
  bool strong = false;                  // consistency=strong
  std::optional<std::int64_t> limit;    // entries: 1..500
  std::optional<std::int64_t> after;    // entries: a ledger sequence number
};
std::variant<read_params, refusal> check_query(std::string_view query);

}  // namespace tally::gateway
