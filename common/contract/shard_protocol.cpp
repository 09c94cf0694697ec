#include "common/contract/shard_protocol.hpp"

#include <span>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"

namespace tally::contract {

namespace {

using kind = shard_command_kind;
using status = shard_reply_status;
using nlohmann::json;

// The fields each kind of command takes, besides type, tenant and account_id.
std::span<const std::string_view> fields_of(kind k) {
  static constexpr std::string_view key_only[] = {"biz_id"};
  static constexpr std::string_view credit[] = {"biz_id", "amount", "memo", "expires_at", "rule_version", "lots"};
  static constexpr std::string_view debit[] = {"biz_id", "amount", "memo"};
  static constexpr std::string_view capture[] = {"biz_id", "amount"};
  static constexpr std::string_view refund[] = {"biz_id", "amount", "original_type", "original_id"};
  static constexpr std::string_view cancel_key[] = {"target_type", "target_id"};
  switch (k) {
    case kind::open_account:
    case kind::release:
    case kind::expire: return key_only;
    case kind::credit: return credit;
    case kind::debit:
    case kind::hold: return debit;
    case kind::capture: return capture;
    case kind::refund: return refund;
    case kind::cancel_key: return cancel_key;
  }
  return {};
}

bool takes(kind k, std::string_view field) {
  for (auto f : fields_of(k))
    if (f == field) return true;
  return false;
}

json expiry_json(const std::optional<std::int64_t>& at) { return at ? json(time::rfc3339_ms(*at)) : json(); }

// A credit's optional lot fields: "expires_at", "rule_version", "lots".
void read_lot_fields(const json& j, validate::field_reader& r, shard_command& c) {
  auto expiry_of = [&](const json& holder, const char* field, std::optional<std::int64_t>& out) {
    auto f = holder.find(field);
    if (f == holder.end() || f->is_null()) return true;
    if (!f->is_string()) return r.fail(std::string(field) + " must be an RFC 3339 UTC time string");
    out = time::parse_rfc3339_ms(f->get_ref<const std::string&>());
    if (!out)
      return r.fail(std::string(field) +
                    " must be an RFC 3339 UTC time such as 2027-01-31T00:00:00Z "
                    "(ending in Z, at most millisecond precision)");
    return true;
  };
  auto rule_of = [&](const json& holder, std::string& out) {
    std::string given;
    if (!validate::field_reader{holder, {}}.id("rule_version", given, false))
      return r.fail("rule_version must match [A-Za-z0-9._:-]{1,64}");
    if (!given.empty()) out = given;
    return true;
  };
  if (!expiry_of(j, "expires_at", c.expires_at) || !rule_of(j, c.rule_version)) return;
  auto lots = j.find("lots");
  if (lots == j.end()) return;
  if (!lots->is_array() || lots->empty() || lots->size() > max_credit_lots)
    return (void)r.fail("lots must be an array of 1 to 100 {amount, expires_at, rule_version}");
  if (j.contains("expires_at") || j.contains("rule_version"))
    return (void)r.fail("lots replaces expires_at and rule_version: give one or the other");
  std::int64_t total = 0;
  for (const auto& l : *lots) {
    std::string unknown;
    if (!l.is_object() || !validate::only_fields(l, {"amount", "expires_at", "rule_version"}, unknown))
      return (void)r.fail("lots must be an array of 1 to 100 {amount, expires_at, rule_version}");
    lot_part part;
    part.rule_version = default_rule_version;
    validate::field_reader lr{l, {}};
    if (!lr.amount("amount", part.amount)) return (void)r.fail("lots[].amount: " + lr.error);
    if (!expiry_of(l, "expires_at", part.expires_at) || !rule_of(l, part.rule_version)) return;
    total += part.amount;
    c.lots.push_back(std::move(part));
  }
  if (total != c.amount) r.fail("lots' amounts must add up to amount");
}

// The fields after type, tenant and account_id, as `c.kind` takes them.
void read_command_fields(const json& j, validate::field_reader& r, shard_command& c) {
  switch (c.kind) {
    case kind::open_account: r.id("biz_id", c.biz_id, false); break;
    case kind::credit:
      if (r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256))
        read_lot_fields(j, r, c);
      break;
    case kind::debit:
    case kind::hold: r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256); break;
    case kind::expire:
      if (r.id("biz_id", c.biz_id) && !lot_id_of(c.biz_id)) r.fail("an expire's biz_id is a lot id");
      break;
    case kind::capture: r.id("biz_id", c.biz_id) && r.amount("amount", c.amount, false); break;
    case kind::release: r.id("biz_id", c.biz_id); break;
    case kind::refund:
      // Without an amount a refund gives back what is left of its original.
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount, false) && r.id("original_type", c.target_type) &&
          r.id("original_id", c.target_id);
      if (r.error.empty() && c.target_type != "debit" && c.target_type != "capture")
        r.fail("original_type must be debit or capture");
      break;
    case kind::cancel_key:
      r.id("target_type", c.target_type) && r.id("target_id", c.target_id);
      if (r.error.empty() && !shard_command_kind_from(c.target_type)) r.fail("target_type must be a command type");
      break;
  }
}

// Reads an optional field of one JSON type into `out`; false when present with another type.
template <class T>
bool optional_field(const json& j, const char* field, T& out) {
  auto f = j.find(field);
  if (f == j.end() || f->is_null()) return true;
  if constexpr (std::is_same_v<T, bool>) {
    if (!f->is_boolean()) return false;
  } else if constexpr (std::is_integral_v<T>) {
    if (!f->is_number_integer()) return false;
  } else {
    if (!f->is_string()) return false;
  }
  out = f->get<T>();
  return true;
}

bool optional_code(const json& j, std::optional<shard_code>& out) {
  std::string name;
  if (!optional_field(j, "code", name)) return false;
  if (name.empty()) return true;
  out = shard_code_from(name);
  return out.has_value();
}

bool read_lots(const json& j, std::vector<lot_part>& out) {
  auto lots = j.find("lots");
  if (lots == j.end()) return true;
  if (!lots->is_array()) return false;
  for (const auto& l : *lots) {
    lot_part p;
    std::string expires_at;
    if (!l.is_object() || !optional_field(l, "lot_id", p.lot_id) || !optional_field(l, "amount", p.amount) ||
        !optional_field(l, "expires_at", expires_at) || !optional_field(l, "rule_version", p.rule_version))
      return false;
    if (!expires_at.empty() && !(p.expires_at = time::parse_rfc3339_ms(expires_at))) return false;
    out.push_back(std::move(p));
  }
  return true;
}

bool read_applied(const json& j, std::optional<applied_outcome>& out) {
  auto a = j.find("applied");
  if (a == j.end()) return true;
  std::string state;
  applied_outcome o;
  if (!a->is_object() || !optional_field(*a, "state", state) || !optional_field(*a, "amount", o.amount) ||
      !optional_code(*a, o.code))
    return false;
  auto s = operation_state_from(state);
  if (!s) return false;
  o.state = *s;
  out = o;
  return true;
}

}  // namespace

std::optional<std::int64_t> lot_id_of(std::string_view biz_id) {
  std::int64_t v = 0;
  if (biz_id.empty() || biz_id.size() > 18 || biz_id[0] == '0') return std::nullopt;
  for (char ch : biz_id) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

shard_command open_account_command(std::string tenant, std::string account_id) {
  shard_command c;
  c.kind = kind::open_account;
  c.tenant = std::move(tenant);
  c.account_id = std::move(account_id);
  return c;
}

json to_json(const shard_command& c) {
  json j = {{"type", to_string(c.kind)}, {"tenant", c.tenant}, {"account_id", c.account_id}};
  if (takes(c.kind, "biz_id") && !c.biz_id.empty()) j["biz_id"] = c.biz_id;
  if (takes(c.kind, "amount") &&
      (c.amount > 0 || c.kind == kind::credit || c.kind == kind::debit || c.kind == kind::hold))
    j["amount"] = c.amount;
  if (takes(c.kind, "memo") && !c.memo.empty()) j["memo"] = c.memo;
  if (c.kind == kind::refund) {
    j["original_type"] = c.target_type;
    j["original_id"] = c.target_id;
  }
  if (c.kind == kind::cancel_key) {
    j["target_type"] = c.target_type;
    j["target_id"] = c.target_id;
  }
  if (c.kind != kind::credit) return j;
  if (!c.lots.empty()) {
    auto lots = json::array();
    for (const auto& l : c.lots) {
      json lot{{"amount", l.amount}, {"rule_version", l.rule_version}};
      if (l.expires_at) lot["expires_at"] = time::rfc3339_ms(*l.expires_at);
      lots.push_back(std::move(lot));
    }
    j["lots"] = std::move(lots);
    return j;
  }
  if (c.expires_at) j["expires_at"] = time::rfc3339_ms(*c.expires_at);
  if (!c.rule_version.empty()) j["rule_version"] = c.rule_version;
  return j;
}

std::variant<shard_command, std::string> parse_shard_command(const json& j) {
  if (!j.is_object()) return std::string("a command must be a JSON object");
  auto type = j.find("type");
  if (type == j.end()) return std::string("missing field: type");
  if (!type->is_string()) return std::string("type must be a string");
  auto k = shard_command_kind_from(type->get<std::string>());
  if (!k) return "unknown command type: " + type->get<std::string>().substr(0, 64);
  shard_command c;
  c.kind = *k;
  for (const auto& [name, value] : j.items()) {
    if (name == "type" || name == "tenant" || name == "account_id" || takes(c.kind, name)) continue;
    return "unknown field: " + name.substr(0, 64);
  }
  validate::field_reader r{j, {}};
  if (r.id("tenant", c.tenant) && r.id("account_id", c.account_id)) read_command_fields(j, r, c);
  if (!r.error.empty()) return r.error;
  return c;
}

shard_reply unavailable_reply(shard_code code, std::int64_t retry_after_ms) {
  shard_reply r;
  r.status = status::unavailable;
  r.code = code;
  r.retry_after_ms = retry_after_ms;
  return r;
}

std::string to_json_text(const shard_reply& r) {
  json j = {{"status", to_string(r.status)}};
  if (r.code) j["code"] = to_string(*r.code);
  if (r.status == status::unavailable) {
    if (r.code == shard_code::account_busy) j["retry_after_ms"] = r.retry_after_ms;
    return j.dump();
  }
  j["command"] = to_string(r.kind);
  j["biz_id"] = r.biz_id;
  if (r.status == status::conflict || r.status == status::retry) return j.dump();
  j["replayed"] = r.replayed;
  if (r.status == status::already_applied && r.applied) {
    j["applied"] = {{"state", to_string(r.applied->state)}, {"amount", r.applied->amount}};
    if (r.applied->code) j["applied"]["code"] = to_string(*r.applied->code);
  }
  if (r.status == status::cancelled) return j.dump();
  j["amount"] = r.amount;
  j["balance_after"] = r.balance_after;
  j["held_after"] = r.held_after;
  j["version"] = r.version;
  j["ledger_seq"] = r.ledger_seq ? json(*r.ledger_seq) : json(nullptr);
  if (r.status == status::succeeded && !r.lots.empty()) {
    auto parts = json::array();
    for (const auto& p : r.lots)
      parts.push_back({{"lot_id", p.lot_id},
                       {"amount", p.amount},
                       {"expires_at", expiry_json(p.expires_at)},
                       {"rule_version", p.rule_version}});
    j["lots"] = std::move(parts);
  }
  return j.dump();
}

std::variant<shard_reply, std::string> parse_shard_reply(const json& j) {
  if (!j.is_object()) return std::string("a reply must be a JSON object");
  std::string name;
  if (!optional_field(j, "status", name) || name.empty()) return std::string("a reply needs a status");
  auto s = value_of(shard_reply_status_names, name);
  if (!s) return "unknown status: " + name.substr(0, 64);
  shard_reply r;
  r.status = *s;
  std::string command;
  std::int64_t ledger_seq = -1;
  if (!optional_code(j, r.code) || !optional_field(j, "command", command) || !optional_field(j, "biz_id", r.biz_id) ||
      !optional_field(j, "replayed", r.replayed) || !optional_field(j, "amount", r.amount) ||
      !optional_field(j, "balance_after", r.balance_after) || !optional_field(j, "held_after", r.held_after) ||
      !optional_field(j, "version", r.version) || !optional_field(j, "ledger_seq", ledger_seq) ||
      !optional_field(j, "retry_after_ms", r.retry_after_ms) || !read_lots(j, r.lots) || !read_applied(j, r.applied))
    return std::string("a reply field has an unknown value or the wrong type");
  if (!command.empty()) {
    auto k = shard_command_kind_from(command);
    if (!k) return "unknown command: " + command.substr(0, 64);
    r.kind = *k;
  }
  if (ledger_seq >= 0) r.ledger_seq = ledger_seq;
  if (r.status == status::already_applied && !r.applied) return std::string("already_applied without applied");
  return r;
}

}  // namespace tally::contract
