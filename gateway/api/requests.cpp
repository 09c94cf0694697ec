#include "gateway/api/requests.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "common/http/target.hpp"
#include "common/validate/fields.hpp"
#include "orchestrator/saga/ids.hpp"
#include "orchestrator/saga/request.hpp"

namespace tally::gateway {

namespace {

constexpr std::int64_t max_wait_ms = 30000;
constexpr std::int64_t max_entries = 500;

orch::saga_type saga_of(write_kind k) {
  switch (k) {
    case write_kind::credit: return orch::saga_type::credit;
    case write_kind::deduct: return orch::saga_type::deduct;
    case write_kind::refund: return orch::saga_type::refund;
    case write_kind::transfer: return orch::saga_type::transfer;
    default: return orch::saga_type::batch_deduct;
  }
}

void add_account(const nlohmann::json& j, const char* field, std::vector<std::string>& out) {
  auto it = j.find(field);
  if (it != j.end() && it->is_string()) out.push_back(it->get<std::string>());
}

}  // namespace

std::optional<write_kind> write_of_collection(std::string_view c) {
  if (c == "accounts") return write_kind::open_account;
  if (c == "credits") return write_kind::credit;
  if (c == "deductions") return write_kind::deduct;
  if (c == "refunds") return write_kind::refund;
  if (c == "transfers") return write_kind::transfer;
  if (c == "batch-deductions") return write_kind::batch_deduct;
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
  auto parsed = orch::parse_saga_request(saga_of(kind), tenant, j);
  if (auto* bad = std::get_if<orch::invalid_request>(&parsed)) return refusal{bad->message};
  // A refund's original is named by a saga id, which has a shape of its own.
  if (kind == write_kind::refund && !orch::is_saga_id(j.value("original_saga_id", "")))
    return refusal{"bad original_saga_id"};
  add_account(j, "account_id", out.accounts);
  add_account(j, "from_account", out.accounts);
  add_account(j, "to_account", out.accounts);
  if (auto items = j.find("items"); items != j.end() && items->is_array())
    for (const auto& item : *items) add_account(item, "account_id", out.accounts);
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
