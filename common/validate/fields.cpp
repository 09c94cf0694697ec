#include "common/validate/fields.hpp"

#include <nlohmann/json.hpp>

namespace tally::validate {

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool field_reader::fail(std::string message) {
  if (error.empty()) error = std::move(message);
  return false;
}

bool field_reader::id(const char* field, std::string& out, bool required) {
  auto it = j.find(field);
  if (it == j.end()) return required ? fail(std::string("missing field: ") + field) : true;
  if (!it->is_string()) return fail(std::string(field) + " must be a string");
  out = it->get<std::string>();
  if (!is_valid_id(out)) return fail(std::string(field) + " must match [A-Za-z0-9._:-]{1,64}");
  return true;
}

bool field_reader::integer(const char* field, std::int64_t& out, std::int64_t min, std::int64_t max, bool required) {
  auto it = j.find(field);
  if (it == j.end()) return required ? fail(std::string("missing field: ") + field) : true;
  const auto range = std::string(field) + " must be between " + std::to_string(min) + " and " + std::to_string(max);
  if (!it->is_number_integer()) return fail(std::string(field) + " must be an integer");
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) return fail(range);
  auto v = it->get<std::int64_t>();
  if (v < min || v > max) return fail(range);
  out = v;
  return true;
}

bool field_reader::amount(const char* field, std::int64_t& out, bool required) {
  auto it = j.find(field);
  if (it == j.end()) return required ? fail(std::string("missing field: ") + field) : true;
  if (!it->is_number_integer()) return fail(std::string(field) + " must be an integer");
  if ((it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(max_amount)) ||
      it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > max_amount)
    return fail(std::string(field) + " must be between 1 and 10^15");
  out = it->get<std::int64_t>();
  return true;
}

bool field_reader::text(const char* field, std::string& out, std::size_t max_len) {
  auto it = j.find(field);
  if (it == j.end()) return true;
  if (!it->is_string()) return fail(std::string(field) + " must be a string");
  out = it->get<std::string>();
  if (out.size() > max_len) return fail(std::string(field) + " is too long");
  return true;
}

bool only_fields(const nlohmann::json& j, std::initializer_list<std::string_view> allowed, std::string& unknown) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (auto a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      // Callers test `unknown` for emptiness: a field named "" must not pass as none.
      unknown = it.key().empty() ? "(empty name)" : it.key();
      return false;
    }
  }
  return true;
}

void append_canonical(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += ';';
}

}  // namespace tally::validate
