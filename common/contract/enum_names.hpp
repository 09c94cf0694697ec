#pragma once
// An enum's wire names as one table of (value, name) rows: the single way
// every enum in Tally is written to and read from text (JSON, SQL, URLs).
// TALLY_NAMED_ENUM (below) declares an enum and its table from one list
// where the wire names are the enumerators' names.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace tally::contract {

template <typename E, std::size_t N>
using enum_names = std::array<std::pair<E, std::string_view>, N>;

// The row's name; "unknown" for a value the table does not hold.
template <typename E, std::size_t N>
constexpr std::string_view name_of(const enum_names<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "unknown";
}

template <typename E, std::size_t N>
constexpr std::optional<E> value_of(const enum_names<E, N>& names, std::string_view name) {
  for (const auto& [v, n] : names)
    if (n == name) return v;
  return std::nullopt;
}

namespace detail {

// Whether V is one of its enum's named enumerators: GCC and Clang spell a
// named value "V = ns::kind::name" in the function's signature, any other
// "V = (ns::kind)7".
template <auto V>
constexpr bool is_enumerator() {
  constexpr std::string_view signature = __PRETTY_FUNCTION__;
  constexpr auto at = signature.rfind("V = ");
  return at != std::string_view::npos && signature[at + 4] != '(';
}

inline constexpr std::size_t enumerators_searched = 64;  // values 0 ... 63

template <class E, std::size_t... I>
constexpr std::array<bool, sizeof...(I)> enumerators(std::index_sequence<I...>) {
  return {is_enumerator<static_cast<E>(I)>()...};
}

}  // namespace detail

// Whether `names` gives every enumerator of E (an enum class valued from 0
// up to 63) exactly one name, every name exactly one enumerator, and
// nothing else: asserted beside each table, so an enumerator added without
// its name does not compile.
template <typename E, std::size_t N>
constexpr bool names_every_value(const enum_names<E, N>& names) {
  constexpr auto named = detail::enumerators<E>(std::make_index_sequence<detail::enumerators_searched>{});
  std::size_t count = 0;
  for (bool b : named) count += b ? 1 : 0;
  if (count != N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const auto index = static_cast<std::size_t>(names[i].first);
    if (index >= named.size() || !named[index] || names[i].second.empty()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (names[j].first == names[i].first || names[j].second == names[i].second) return false;
  }
  return true;
}

namespace detail {

constexpr bool is_identifier_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// The enumerators of a list as the preprocessor spells it ("a, b, c"):
// each piece between commas, without its white space; none is empty.
template <typename Visit>
constexpr void for_each_listed(std::string_view list, Visit visit) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    auto name = list.substr(0, comma);
    while (!name.empty() && !is_identifier_char(name.front())) name.remove_prefix(1);
    while (!name.empty() && !is_identifier_char(name.back())) name.remove_suffix(1);
    if (!name.empty()) visit(name);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
}

constexpr std::size_t count_listed(std::string_view list) {
  std::size_t n = 0;
  for_each_listed(list, [&n](std::string_view) { ++n; });
  return n;
}

// Row i names the i-th enumerator, valued i. A piece that is not a bare
// name (an initializer, "a = 3") stops the compilation here.
template <typename E, std::size_t N>
constexpr enum_names<E, N> names_listed(std::string_view list) {
  enum_names<E, N> names{};
  std::size_t i = 0;
  for_each_listed(list, [&](std::string_view name) {
    for (char c : name)
      if (!is_identifier_char(c)) throw "an enumerator named by TALLY_NAMED_ENUM takes no initializer";
    names[i] = {static_cast<E>(i), name};
    ++i;
  });
  return names;
}

}  // namespace detail

}  // namespace tally::contract

// Declares `enum class E { enumerators... }`, its table `E_names`, in
// which every enumerator's name is its wire name, and `to_string(E)`: the
// list is written once. The enumerators take no initializers (they are
// valued 0, 1, ...), and names_every_value is asserted on the table. An
// enum whose wire names are not its enumerators' names writes its table by
// hand.
#define TALLY_NAMED_ENUM(E, ...)                                                                                       \
  enum class E { __VA_ARGS__ };                                                                                        \
  inline constexpr auto E##_names =                                                                                    \
      ::tally::contract::detail::names_listed<E, ::tally::contract::detail::count_listed(#__VA_ARGS__)>(#__VA_ARGS__); \
  constexpr std::string_view to_string(E value) { return ::tally::contract::name_of(E##_names, value); }               \
  static_assert(::tally::contract::names_every_value(E##_names))
