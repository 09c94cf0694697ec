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

}  // namespace tally::contract
