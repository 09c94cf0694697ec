#include "orchestrator/saga/request.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"

namespace tally::orch {

namespace {

using validate::append_canonical;

std::string hash_of(const saga_request& r) {
  std::string c;
  append_canonical(c, to_string(r.type));
  append_canonical(c, r.tenant);
  append_canonical(c, r.biz_id);
  append_canonical(c, r.input.account);
  append_canonical(c, r.input.source);
  append_canonical(c, r.input.destination);
  append_canonical(c, std::to_string(r.input.amount));
  append_canonical(c, r.input.memo);
  // Only credits with lot fields add them: every other request's hash is as before lots.
  if (r.input.expires_at || !r.input.rule_version.empty()) {
    append_canonical(c, r.input.expires_at ? std::to_string(*r.input.expires_at) : "never");
    append_canonical(c, r.input.rule_version);
  }
  append_canonical(c, r.input.hold_timeout ? std::to_string(r.input.hold_timeout->count()) : "");
  append_canonical(c, r.timeout ? std::to_string(r.timeout->count()) : "");
  append_canonical(c, r.input.original_saga_id);
  append_canonical(c, std::to_string(r.input.items.size()));
  for (const auto& item : r.input.items) {
    append_canonical(c, item.account);
    append_canonical(c, std::to_string(item.amount));
  }
  return digest::sha256_hex(c);
}

// Reads the items of a batch deduction: 1-1000 objects, distinct accounts.
bool read_items(validate::field_reader& r, std::vector<saga_item>& out) {
  auto it = r.j.find("items");
  if (it == r.j.end()) return r.fail("missing field: items");
  if (!it->is_array()) return r.fail("items must be an array");
  if (it->empty() || it->size() > max_batch_items)
    return r.fail("items must hold 1 to " + std::to_string(max_batch_items) + " entries");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& e = (*it)[i];
    const auto where = "items[" + std::to_string(i) + "]";
    if (!e.is_object()) return r.fail(where + " must be an object");
    std::string unknown;
    if (!validate::only_fields(e, {"account_id", "amount"}, unknown))
      return r.fail(where + ": unknown field: " + unknown.substr(0, 64));
    validate::field_reader item{e, {}};
    saga_item s;
    if (!item.id("account_id", s.account) || !item.amount("amount", s.amount)) return r.fail(where + ": " + item.error);
    if (!seen.insert(s.account).second) return r.fail(where + ": account " + s.account + " appears twice");
    out.push_back(std::move(s));
  }
  return true;
}

// A credit's "expires_at": RFC 3339 UTC ending in Z, at most milliseconds.
// Whether it is still to come is the orchestrator's check (a replay of an
// accepted credit stays a replay after its expiry).
bool read_expiry(validate::field_reader& r, saga_input& in) {
  auto f = r.j.find("expires_at");
  if (f == r.j.end()) return true;
  if (f->is_string()) in.expires_at = time::parse_rfc3339_ms(f->get_ref<const std::string&>());
  if (!in.expires_at)
    return r.fail(
        "expires_at must be an RFC 3339 UTC time ending in Z with at most millisecond precision, "
        "such as 2027-01-31T00:00:00Z");
  return true;
}

}  // namespace

std::variant<saga_request, invalid_request> parse_saga_request(saga_type type, std::string_view tenant,
                                                               const nlohmann::json& j) {
  if (!j.is_object()) return invalid_request{"the body must be a JSON object"};
  if (!validate::is_valid_id(tenant)) return invalid_request{"tenant must match [A-Za-z0-9._:-]{1,64}"};
  saga_request q;
  q.type = type;
  q.tenant = std::string(tenant);
  validate::field_reader r{j, {}};
  std::string unknown;
  auto& in = q.input;
  switch (type) {
    case saga_type::credit:
      q.workflow = "credit";
      if (!validate::only_fields(j, {"account_id", "amount", "biz_id", "memo", "expires_at", "rule_version"}, unknown))
        break;
      r.id("account_id", in.account) && r.amount("amount", in.amount) && r.id("biz_id", q.biz_id) &&
          r.text("memo", in.memo, 256) && read_expiry(r, in) && r.id("rule_version", in.rule_version, false);
      if (in.rule_version == "1") in.rule_version.clear();  // the default, hashed as when not given
      break;
    case saga_type::deduct: {
      if (!validate::only_fields(j, {"account_id", "amount", "biz_id", "hold_timeout_ms"}, unknown)) break;
      std::int64_t hold_ms = 0;
      r.id("account_id", in.account) && r.amount("amount", in.amount) && r.id("biz_id", q.biz_id) &&
          r.integer("hold_timeout_ms", hold_ms, 1, max_hold_timeout_ms, false);
      if (hold_ms > 0) in.hold_timeout = std::chrono::milliseconds(hold_ms);
      q.workflow = in.hold_timeout ? "deduct_held" : "deduct";
      break;
    }
    case saga_type::refund:
      // Which workflow runs, and against which accounts, depends on the
      // original: resolve_refund decides once it is loaded.
      q.workflow = "refund";
      if (!validate::only_fields(j, {"original_saga_id", "amount", "biz_id", "account_id"}, unknown)) break;
      r.id("original_saga_id", in.original_saga_id) && r.amount("amount", in.amount, false) &&
          r.id("biz_id", q.biz_id) && r.id("account_id", in.account, false);
      break;
    case saga_type::transfer: {
      q.workflow = "transfer";
      if (!validate::only_fields(j, {"from_account", "to_account", "amount", "biz_id", "timeout_ms"}, unknown)) break;
      std::int64_t timeout_ms = 0;
      r.id("from_account", in.source) && r.id("to_account", in.destination) && r.amount("amount", in.amount) &&
          r.id("biz_id", q.biz_id) && r.integer("timeout_ms", timeout_ms, 1, max_transfer_timeout_ms, false);
      if (timeout_ms > 0) q.timeout = std::chrono::milliseconds(timeout_ms);
      if (r.error.empty() && in.source == in.destination) r.fail("from_account and to_account must differ");
      break;
    }
    case saga_type::batch_deduct:
      q.workflow = "batch_deduct";
      if (!validate::only_fields(j, {"biz_id", "items"}, unknown)) break;
      r.id("biz_id", q.biz_id) && read_items(r, in.items);
      break;
  }
  if (!unknown.empty()) return invalid_request{"unknown field: " + unknown.substr(0, 64)};
  if (!r.error.empty()) return invalid_request{r.error};
  q.request_hash = hash_of(q);
  return q;
}

std::optional<refund_refusal> resolve_refund(saga_request& r, const saga& original, saga_type original_type) {
  using reason = refund_refusal::reason;
  const auto& o = original.input;
  if (original_type != saga_type::deduct && original_type != saga_type::transfer &&
      original_type != saga_type::batch_deduct)
    return refund_refusal{reason::invalid_state, "only a deduction, a transfer or a batch deduction can be refunded"};
  if (original.state != saga_state::completed)
    return refund_refusal{reason::invalid_state, "the original saga has not completed"};
  auto& in = r.input;
  const std::string named = in.account;  // the request's account_id, if any
  auto no_item = [&] {
    return refund_refusal{reason::not_found, "saga " + original.id + " has no item for account " + named};
  };
  in.original_key = step_key(original);
  if (original_type == saga_type::batch_deduct) {
    in.original_type = "capture";
    if (named.empty()) {
      if (in.amount != 0)
        return refund_refusal{reason::invalid,
                              "amount needs account_id: a batch deduction is refunded one item at a time, or all "
                              "that is left of every item without an amount"};
      r.workflow = "revoke_items";
      for (const auto& item : o.items) in.items.push_back({item.account, 0});  // 0: what is left
      return std::nullopt;
    }
    auto item = std::find_if(o.items.begin(), o.items.end(), [&](const saga_item& i) { return i.account == named; });
    if (item == o.items.end()) return no_item();
    r.workflow = "refund";
    return std::nullopt;
  }
  if (in.amount == 0) return refund_refusal{reason::invalid, "amount is required to refund a deduction or a transfer"};
  const bool transfer = original.workflow == "transfer";
  if (!named.empty() && named != (transfer ? o.source : o.account)) return no_item();
  if (transfer) {
    r.workflow = "refund_transfer";
    in.account = o.source;  // the account refunded, as the view names it
    in.source = o.source;
    in.destination = o.destination;
    in.original_type = "capture";
  } else {
    r.workflow = "refund";
    in.account = o.account;
    in.original_type = original.workflow == "deduct_held" ? "capture" : "debit";
  }
  return std::nullopt;
}

std::optional<invalid_request> check_action_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return invalid_request{"malformed JSON"};
  if (!j.is_object() || !j.empty()) return invalid_request{"the body must be {} (this action takes no fields)"};
  return std::nullopt;
}

}  // namespace tally::orch
