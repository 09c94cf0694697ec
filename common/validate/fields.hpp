#pragma once
// Validation shared by every service that takes commands: the id alphabet,
// the amount range, typed reading of JSON fields with a clear first error,
// and the canonical encoding that request hashes are computed over.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tally::validate {

inline constexpr std::int64_t max_amount = 1'000'000'000'000'000;  // 10^15

// [A-Za-z0-9._:-]{1,64}
bool is_valid_id(std::string_view id);

// Reads fields of one JSON object; keeps the first problem in `error` (so a
// chain `r.id(..) && r.amount(..)` stops at it).
struct field_reader {
  const nlohmann::json& j;
  std::string error;

  bool fail(std::string message);
  bool id(const char* field, std::string& out, bool required = true);
  // An integer amount, 1 ... 10^15.
  bool amount(const char* field, std::int64_t& out, bool required = true);
  // An integer in [min, max] (a duration, a limit).
  bool integer(const char* field, std::int64_t& out, std::int64_t min, std::int64_t max, bool required = true);
  // An optional string of at most max_len bytes.
  bool text(const char* field, std::string& out, std::size_t max_len);
};

// False, with the first unknown field's name, when `j` has a field not in `allowed`.
bool only_fields(const nlohmann::json& j, std::initializer_list<std::string_view> allowed, std::string& unknown);

// Appends one field, length-prefixed, so no two field lists share an encoding.
void append_canonical(std::string& out, std::string_view value);

}  // namespace tally::validate
