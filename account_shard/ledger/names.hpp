#pragma once
// An enum's wire names, one array per enum in the enum's order.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace tally::shard {

template <typename E, std::size_t N>
std::optional<E> from_names(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace tally::shard
