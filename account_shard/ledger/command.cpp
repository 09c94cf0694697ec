#include "account_shard/ledger/command.hpp"

#include <array>
#include <nlohmann/json.hpp>

#include "common/digest/sha256.hpp"

namespace tally::shard {

namespace {
constexpr std::array<std::string_view, 8> kind_names = {"open_account", "credit", "debit",  "hold",
                                                        "capture",      "release", "refund", "cancel_key"};

void append_field(std::string& out, std::string_view v) {
  // Length-prefixed, so no two field lists share an encoding.
  out += std::to_string(v.size());
  out += ':';
  out += v;
  out += ';';
}
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

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string request_hash(const command& c) {
  std::string canonical;
  append_field(canonical, to_string(c.kind));
  append_field(canonical, c.tenant);
  append_field(canonical, c.account_id);
  append_field(canonical, c.biz_id);
  append_field(canonical, std::to_string(c.amount));
  append_field(canonical, c.target_type);
  append_field(canonical, c.target_id);
  append_field(canonical, c.memo);
  return digest::sha256_hex(canonical);
}

namespace {

struct reader {
  const nlohmann::json& j;
  std::string error;

  bool fail(std::string msg) {
    if (error.empty()) error = std::move(msg);
    return false;
  }
  bool id(const char* field, std::string& out, bool required = true) {
    auto it = j.find(field);
    if (it == j.end()) return required ? fail(std::string("missing field: ") + field) : true;
    if (!it->is_string()) return fail(std::string(field) + " must be a string");
    out = it->get<std::string>();
    if (!is_valid_id(out)) return fail(std::string(field) + " must match [A-Za-z0-9._:-]{1,64}");
    return true;
  }
  bool amount(const char* field, std::int64_t& out, bool required = true) {
    auto it = j.find(field);
    if (it == j.end()) return required ? fail(std::string("missing field: ") + field) : true;
    if (!it->is_number_integer()) return fail(std::string(field) + " must be an integer");
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max_amount))
      return fail(std::string(field) + " must be between 1 and 10^15");
    auto v = it->get<std::int64_t>();
    if (v < 1 || v > max_amount) return fail(std::string(field) + " must be between 1 and 10^15");
    out = v;
    return true;
  }
  bool text(const char* field, std::string& out, std::size_t max_len) {
    auto it = j.find(field);
    if (it == j.end()) return true;
    if (!it->is_string()) return fail(std::string(field) + " must be a string");
    out = it->get<std::string>();
    if (out.size() > max_len) return fail(std::string(field) + " is too long");
    return true;
  }
};

bool only_fields(const nlohmann::json& j, std::initializer_list<std::string_view> allowed, std::string& unknown) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (auto a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      unknown = it.key();
      return false;
    }
  }
  return true;
}

}  // namespace

std::variant<command, invalid_command> parse_command(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_command{"a command must be a JSON object"};
  auto type = j.find("type");
  if (type == j.end()) return invalid_command{"missing field: type"};
  if (!type->is_string()) return invalid_command{"type must be a string"};
  auto kind = command_kind_from(type->get<std::string>());
  if (!kind) return invalid_command{"unknown command type: " + type->get<std::string>().substr(0, 64)};
  command c;
  c.kind = *kind;
  reader r{j, {}};
  r.id("tenant", c.tenant) && r.id("account_id", c.account_id);
  std::string unknown;
  switch (c.kind) {
    case command_kind::open_account:
      if (!only_fields(j, {"type", "tenant", "account_id", "biz_id"}, unknown)) break;
      r.id("biz_id", c.biz_id, false);
      if (c.biz_id.empty()) c.biz_id = "open";
      break;
    case command_kind::credit:
    case command_kind::debit:
    case command_kind::hold:
      if (!only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount", "memo"}, unknown)) break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.text("memo", c.memo, 256);
      break;
    case command_kind::capture:
      if (!only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount"}, unknown)) break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount, false);
      break;
    case command_kind::release:
      if (!only_fields(j, {"type", "tenant", "account_id", "biz_id"}, unknown)) break;
      r.id("biz_id", c.biz_id);
      break;
    case command_kind::refund:
      if (!only_fields(j, {"type", "tenant", "account_id", "biz_id", "amount", "original_type", "original_id"},
                       unknown))
        break;
      r.id("biz_id", c.biz_id) && r.amount("amount", c.amount) && r.id("original_type", c.target_type) &&
          r.id("original_id", c.target_id);
      if (r.error.empty() && c.target_type != "debit" && c.target_type != "capture")
        r.fail("original_type must be debit or capture");
      break;
    case command_kind::cancel_key:
      if (!only_fields(j, {"type", "tenant", "account_id", "target_type", "target_id"}, unknown)) break;
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
