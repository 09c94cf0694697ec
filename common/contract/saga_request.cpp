#include "common/contract/saga_request.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"

namespace tally::contract {

namespace {

using validate::append_canonical;

// Stored hashes are compared with new requests' forever: this encoding
// never changes (fields added later are hashed only when present).
std::string hash_of(const saga_request& r) {
  std::string c;
  append_canonical(c, to_string(r.type));
  append_canonical(c, r.tenant);
  append_canonical(c, r.biz_id);
  append_canonical(c, r.account);
  append_canonical(c, r.source);
  append_canonical(c, r.destination);
  append_canonical(c, std::to_string(r.amount));
  append_canonical(c, r.memo);
  // Only credits with lot fields add them: every other request's hash is as before lots.
  if (r.expires_at || !r.rule_version.empty()) {
    append_canonical(c, r.expires_at ? std::to_string(*r.expires_at) : "never");
    append_canonical(c, r.rule_version);
  }
  append_canonical(c, r.hold_timeout ? std::to_string(r.hold_timeout->count()) : "");
  append_canonical(c, r.timeout ? std::to_string(r.timeout->count()) : "");
  append_canonical(c, r.original_saga_id);
  append_canonical(c, std::to_string(r.items.size()));
  for (const auto& item : r.items) {
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
bool read_expiry(validate::field_reader& r, saga_request& q) {
  auto f = r.j.find("expires_at");
  if (f == r.j.end()) return true;
  if (f->is_string()) q.expires_at = time::parse_rfc3339_ms(f->get_ref<const std::string&>());
  if (!q.expires_at)
    return r.fail(
        "expires_at must be an RFC 3339 UTC time ending in Z with at most millisecond precision, "
        "such as 2027-01-31T00:00:00Z");
  return true;
}

// An optional duration in milliseconds: absent or 0 is none.
void set_duration(std::optional<std::chrono::milliseconds>& out, std::int64_t ms) {
  if (ms > 0) out = std::chrono::milliseconds(ms);
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
  switch (type) {
    case saga_type::credit:
      if (!validate::only_fields(j, {"account_id", "amount", "biz_id", "memo", "expires_at", "rule_version"}, unknown))
        break;
      r.id("account_id", q.account) && r.amount("amount", q.amount) && r.id("biz_id", q.biz_id) &&
          r.text("memo", q.memo, 256) && read_expiry(r, q) && r.id("rule_version", q.rule_version, false);
      if (q.rule_version == "1") q.rule_version.clear();  // the default, hashed as when not given
      break;
    case saga_type::deduct: {
      if (!validate::only_fields(j, {"account_id", "amount", "biz_id", "hold_timeout_ms"}, unknown)) break;
      std::int64_t hold_ms = 0;
      r.id("account_id", q.account) && r.amount("amount", q.amount) && r.id("biz_id", q.biz_id) &&
          r.integer("hold_timeout_ms", hold_ms, 1, max_hold_timeout_ms, false);
      set_duration(q.hold_timeout, hold_ms);
      break;
    }
    case saga_type::refund:
      if (!validate::only_fields(j, {"original_saga_id", "amount", "biz_id", "account_id"}, unknown)) break;
      r.id("original_saga_id", q.original_saga_id) && r.amount("amount", q.amount, false) && r.id("biz_id", q.biz_id) &&
          r.id("account_id", q.account, false);
      break;
    case saga_type::transfer: {
      if (!validate::only_fields(j, {"from_account", "to_account", "amount", "biz_id", "timeout_ms"}, unknown)) break;
      std::int64_t timeout_ms = 0;
      r.id("from_account", q.source) && r.id("to_account", q.destination) && r.amount("amount", q.amount) &&
          r.id("biz_id", q.biz_id) && r.integer("timeout_ms", timeout_ms, 1, max_transfer_timeout_ms, false);
      set_duration(q.timeout, timeout_ms);
      if (r.error.empty() && q.source == q.destination) r.fail("from_account and to_account must differ");
      break;
    }
    case saga_type::batch_deduct:
      if (!validate::only_fields(j, {"biz_id", "items"}, unknown)) break;
      r.id("biz_id", q.biz_id) && read_items(r, q.items);
      break;
  }
  if (!unknown.empty()) return invalid_request{"unknown field: " + unknown.substr(0, 64)};
  if (!r.error.empty()) return invalid_request{r.error};
  q.request_hash = hash_of(q);
  return q;
}

std::vector<std::string> accounts_of(const saga_request& r) {
  std::vector<std::string> out;
  for (const auto* a : {&r.account, &r.source, &r.destination})
    if (!a->empty()) out.push_back(*a);
  for (const auto& item : r.items) out.push_back(item.account);
  return out;
}

nlohmann::json to_canonical_json(const saga_request& r) {
  nlohmann::json j{{"type", to_string(r.type)},
                   {"tenant", r.tenant},
                   {"biz_id", r.biz_id},
                   {"amount", r.amount},
                   {"request_hash", r.request_hash}};
  auto text = [&](const char* field, const std::string& v) {
    if (!v.empty()) j[field] = v;
  };
  text("account_id", r.account);
  text("from_account", r.source);
  text("to_account", r.destination);
  text("memo", r.memo);
  text("rule_version", r.rule_version);
  text("original_saga_id", r.original_saga_id);
  if (r.expires_at) j["expires_at_ms"] = *r.expires_at;
  if (r.hold_timeout) j["hold_timeout_ms"] = r.hold_timeout->count();
  if (r.timeout) j["timeout_ms"] = r.timeout->count();
  if (!r.items.empty()) {
    auto& items = j["items"] = nlohmann::json::array();
    for (const auto& item : r.items) items.push_back({{"account_id", item.account}, {"amount", item.amount}});
  }
  return j;
}

std::optional<saga_request> from_canonical_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  try {
    saga_request r;
    auto type = saga_type_from(j.at("type").get_ref<const std::string&>());
    if (!type) return std::nullopt;
    r.type = *type;
    r.tenant = j.at("tenant").get<std::string>();
    r.biz_id = j.at("biz_id").get<std::string>();
    r.amount = j.at("amount").get<std::int64_t>();
    r.request_hash = j.at("request_hash").get<std::string>();
    r.account = j.value("account_id", "");
    r.source = j.value("from_account", "");
    r.destination = j.value("to_account", "");
    r.memo = j.value("memo", "");
    r.rule_version = j.value("rule_version", "");
    r.original_saga_id = j.value("original_saga_id", "");
    if (j.contains("expires_at_ms")) r.expires_at = j.at("expires_at_ms").get<std::int64_t>();
    set_duration(r.hold_timeout, j.value("hold_timeout_ms", std::int64_t{0}));
    set_duration(r.timeout, j.value("timeout_ms", std::int64_t{0}));
    if (auto items = j.find("items"); items != j.end())
      for (const auto& item : items->get_ref<const nlohmann::json::array_t&>())
        r.items.push_back({item.at("account_id").get<std::string>(), item.at("amount").get<std::int64_t>()});
    if (r.tenant.empty() || r.biz_id.empty() || r.request_hash.empty()) return std::nullopt;
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<invalid_request> check_action_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return invalid_request{"malformed JSON"};
  if (!j.is_object() || !j.empty()) return invalid_request{"the body must be {} (this action takes no fields)"};
  return std::nullopt;
}

}  // namespace tally::contract
