#include "account_shard/ledger/command.hpp"

#include <nlohmann/json.hpp>

#include "common/digest/digest.hpp"
#include "common/validate/fields.hpp"

namespace tally::shard {

namespace {
std::string expiry_text(const std::optional<std::int64_t>& at) { return at ? std::to_string(*at) : "never"; }
}  // namespace

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

std::string_view command::rule() const {
  return rule_version.empty() ? contract::default_rule_version : std::string_view(rule_version);
}

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
  if (c.expires_at || c.rule() != contract::default_rule_version) {
    validate::append_canonical(canonical, expiry_text(c.expires_at));
    validate::append_canonical(canonical, c.rule());
  }
  for (const auto& l : c.lots) {
    validate::append_canonical(canonical, std::to_string(l.amount));
    validate::append_canonical(canonical, expiry_text(l.expires_at));
    validate::append_canonical(canonical, l.rule_version);
  }
  return digest::sha256_hex(canonical);
}

std::variant<command, invalid_command> parse_command(const nlohmann::json& j) {
  auto parsed = contract::parse_shard_command(j);
  if (auto* bad = std::get_if<std::string>(&parsed)) return invalid_command{std::move(*bad)};
  command c{std::move(std::get<contract::shard_command>(parsed)), {}};
  if (c.kind == command_kind::open_account && c.biz_id.empty()) c.biz_id = "open";
  c.request_hash = request_hash(c);
  return c;
}

}  // namespace tally::shard
