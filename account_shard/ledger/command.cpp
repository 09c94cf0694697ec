#include "account_shard/ledger/command.hpp"

#include <array>
#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

namespace {
constexpr std::array<std::string_view, 8> kind_names = {"open_account", "credit", "debit",  "hold",
                                                        "capture",      "release", "refund", "cancel_key"};
}  // namespace

std::string_view to_string(command_kind k) { return kind_names[static_cast<std::size_t>(k)]; }

std::optional<command_kind> command_kind_from(std::string_view name) {
  for (std::size_t i = 0; i < kind_names.size(); ++i)
    if (kind_names[i] == name) return static_cast<command_kind>(i);
  return std::nullopt;
}

std::string op_key::flat() const {
  std::string out;
  out.reserve(tenant.size() + account_id.size() + biz_type.size() + biz_id.size() + 3);
  out.append(tenant).append(1, '\x1f').append(account_id).append(1, '\x1f').append(biz_type).append(1, '\x1f').append(biz_id);
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
    case command_kind::debit:
    case command_kind::hold:
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount", "memo"}, unknown)) break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256);
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
      if (!validate::only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount", "original_type", "original_id"},
                       unknown))
        break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.id("original_type", c.target_type) &&
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
