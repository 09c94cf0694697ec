#include "account_shard/ledger/command.hpp"

#include <array>
#include <nlohmann/json.hpp>

#include "common/contract/enum_names.hpp"
#include "common/digest/digest.hpp"
#include "common/time/rfc3339.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

namespace {
constexpr contract::enum_names<command_kind, 9> kind_names{{{command_kind::open_account, "open_account"},
                                                            {command_kind::credit, "credit"},
                                                            {command_kind::debit, "debit"},
                                                            {command_kind::hold, "hold"},
                                                            {command_kind::capture, "capture"},
                                                            {command_kind::release, "release"},
                                                            {command_kind::refund, "refund"},
                                                            {command_kind::cancel_key, "cancel_key"},
                                                            {command_kind::expire, "expire"}}};
constexpr std::size_t max_credit_lots = 100;

std::string expiry_text(const std::optional<std::int64_t>& at) { return at ? std::to_string(*at) : "never"; }

// A credit's optional lot fields: "expires_at", "rule_version", "lots".
void read_lot_fields(const nlohmann::json& j, validate::field_reader& r, command& c) {
  auto expiry_of = [&](const nlohmann::json& holder, const char* field, std::optional<std::int64_t>& out) {
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
  auto rule_of = [&](const nlohmann::json& holder, std::string& out) {
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
    part.rule_version = "1";
    validate::field_reader lr{l, {}};
    if (!lr.amount("amount", part.amount)) return (void)r.fail("lots[].amount: " + lr.error);
    if (!expiry_of(l, "expires_at", part.expires_at) || !rule_of(l, part.rule_version)) return;
    total += part.amount;
    c.lots.push_back(std::move(part));
  }
  if (total != c.amount) r.fail("lots' amounts must add up to amount");
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

std::string_view to_string(command_kind k) { return contract::name_of(kind_names, k); }

std::optional<command_kind> command_kind_from(std::string_view name) { return contract::value_of(kind_names, name); }

std::string op_key::flat() const {
  std::string out;
  out.reserve(tenant.size() + account_id.size() + biz_type.size() + biz_id.size() + 3);
  out.append(tenant)
      .append(1, '\x1f')
      .append(account_id)
      .append(1, '\x1f')
      .append(biz_type)
      .append(1, '\x1f')
      .append(biz_id);
  return out;
}

op_key command::key() const {
  if (kind == command_kind::cancel_key) return {tenant, account_id, target_type, target_id};
  return {tenant, account_id, std::string(to_string(kind)), biz_id};
}

op_key command::target_key() const { return {tenant, account_id, target_type, target_id}; }

std::string request_hash(const command& c) {
  std::string canonical;
  validate::append_canonical(canonical, to_string(c.kind));
  validate::append_canonical(canonical, c.tenant);
  validate::append_canonical(canonical, c.account_id);
  validate::append_canonical(canonical, c.biz_id);
  validate::append_canonical(canonical, std::to_string(c.amount));
  validate::append_canonical(canonical, c.target_type);
  validate::append_canonical(canonical, c.target_id);
  validate::append_canonical(canonical, c.memo);
  // Only credits that carry lot fields add them, so every other command's
  // hash is what it was before lots existed.
  if (c.expires_at || c.rule_version != "1") {
    validate::append_canonical(canonical, expiry_text(c.expires_at));
    validate::append_canonical(canonical, c.rule_version);
  }
  for (const auto& l : c.lots) {
    validate::append_canonical(canonical, std::to_string(l.amount));
    validate::append_canonical(canonical, expiry_text(l.expires_at));
    validate::append_canonical(canonical, l.rule_version);
  }
  return digest::sha256_hex(canonical);
}

std::variant<command, invalid_command> parse_command(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_command{"a command must be a JSON object"};
  auto type = j.find("type");
  if (type == j.end()) return invalid_command{"missing field: type"};
  if (!type->is_string()) return invalid_command{"type must be a string"};
  auto kind = command_kind_from(type->get<std::string>());
  if (!kind) return invalid_command{"unknown command type: " + type->get<std::string>().substr(0, 64)};
  command c;
  c.kind = *kind;
  validate::field_reader r{j, {}};
  r.id("tenant", c.tenant) && r.id("account_id", c.account_id);
  std::string unknown;
  switch (c.kind) {
    case command_kind::open_account:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id"}, unknown)) break;
      r.id("biz_id", c.biz_id, false);
      if (c.biz_id.empty()) c.biz_id = "open";
      break;
    case command_kind::credit:
      if (!validate::only_fields(
              j, {"type", "tenant", "account_id", "biz_id", "amount", "memo", "expires_at", "rule_version", "lots"},
              unknown))
        break;
      if (r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256))
        read_lot_fields(j, r, c);
      break;
    case command_kind::debit:
    case command_kind::hold:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount", "memo"}, unknown)) break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256);
      break;
    case command_kind::expire:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id"}, unknown)) break;
      if (r.id("biz_id", c.biz_id) && !lot_id_of(c.biz_id)) r.fail("an expire's biz_id is a lot id");
      break;
    case command_kind::capture:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount"}, unknown)) break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount, false);
      break;
    case command_kind::release:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id"}, unknown)) break;
      r.id("biz_id", c.biz_id);
      break;
    case command_kind::refund:
      if (!validate::only_fields(
              j, {"type", "tenant", "account_id", "biz_id", "amount", "original_type", "original_id"}, unknown))
        break;
      // Without an amount a refund gives back what is left of its original.
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount, false) && r.id("original_type", c.target_type) &&
          r.id("original_id", c.target_id);
      if (r.error.empty() && c.target_type != "debit" && c.target_type != "capture")
        r.fail("original_type must be debit or capture");
      break;
    case command_kind::cancel_key:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "target_type", "target_id"}, unknown)) break;
      r.id("target_type", c.target_type) && r.id("target_id", c.target_id);
      if (r.error.empty() && !command_kind_from(c.target_type)) r.fail("target_type must be a command type");
      break;
  }
  if (!unknown.empty()) return invalid_command{"unknown field: " + unknown.substr(0, 64)};
  if (!r.error.empty()) return invalid_command{r.error};
  c.request_hash = request_hash(c);
  return c;
}

}  // namespace tally::shard
