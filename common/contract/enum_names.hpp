#pragma once
// An enum's wire names as one table of (value, name) rows: the single way
// every enum in Tally is written to and read from text (JSON, SQL, URLs).
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

}  // namespace tally::contract
