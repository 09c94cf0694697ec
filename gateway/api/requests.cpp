#include "gateway/api/requests.hpp"

#include <nlohmann/json.hpp>

#include "common/contract/saga_id.hpp"
#include "common/http/target.hpp"
#include "common/validate/fields.hpp"

namespace tally::gateway {

namespace {

constexpr std::int64_t max_wait_ms = 30000;
constexpr std::int64_t max_entries = 500;

contract::saga_type saga_of(write_kind k) {
  switch (k) {
    case write_kind::credit: return contract::saga_type::credit;
    case write_kind::deduct: return contract::saga_type::deduct;
    case write_kind::refund: return contract::saga_type::refund;
    case write_kind::transfer: return contract::saga_type::transfer;
    default: return contract::saga_type::batch_deduct;
  }
}

}  // namespace

std::optional<write_kind> write_of_collection(std::string_view c) {
  if (c == "accounts") return write_kind::open_account;
  for (auto k :
       {write_kind::credit, write_kind::deduct, write_kind::refund, write_kind::transfer, write_kind::batch_deduct})
    if (contract::collection_of(saga_of(k)) == c) return k;
  return std::nullopt;
}

std::variant<accepted_write, refusal> check_write(write_kind kind, std::string_view tenant, std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return refusal{"malformed JSON"};
  if (!j.is_object()) return refusal{"the body must be a JSON object"};
  accepted_write out;
  if (kind == write_kind::open_account) {
    std::string unknown;
    if (!validate::only_fields(j, {"account_id"}, unknown)) return refusal{"unknown field " + unknown};
    validate::field_reader r{j, {}};
    if (!r.id("account_id", out.account_id)) return refusal{r.error};
    out.accounts.push_back(out.account_id);
    return out;
  }
  auto parsed = contract::parse_saga_request(saga_of(kind), tenant, j);
  if (auto* bad = std::get_if<contract::invalid_request>(&parsed)) return refusal{bad->message};
  auto& saga = std::get<contract::saga_request>(parsed);
  // A refund's original is named by a saga id, which has a shape of its own.
  if (kind == write_kind::refund && !contract::is_saga_id(saga.original_saga_id))
    return refusal{"bad original_saga_id"};
  out.accounts = contract::accounts_of(saga);
  out.saga = std::move(saga);
  return out;
}

std::variant<read_params, refusal> check_query(std::string_view query) {
  read_params p;
  auto integer = [&](const char* name, std::int64_t min, std::int64_t max, std::optional<std::int64_t>& out) {
    auto text = http::query_param(query, name);
    if (!text) return true;
    auto v = http::to_int(*text);
    if (!v || *v < min || *v > max) return false;
    out = *v;
    return true;
  };
  if (!integer("wait_ms", 0, max_wait_ms, p.wait_ms)) return refusal{"wait_ms must be an integer from 0 to 30000"};
  if (!integer("limit", 1, max_entries, p.limit)) return refusal{"limit must be an integer from 1 to 500"};
  if (!integer("after", 0, INT64_MAX, p.after)) return refusal{"after must be a cursor from a previous page"};
  if (auto c = http::query_param(query, "consistency")) {
    if (*c != "strong" && *c != "eventual") return refusal{"consistency must be strong or eventual"};
    p.strong = *c == "strong";
  }
  return p;
}

}  // namespace tally::gateway
