#include "common/contract/saga_id.hpp"

namespace tally::contract {

namespace {
constexpr std::string_view alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";  // Crockford: no I, L, O, U
constexpr std::string_view prefix = "sg_";
constexpr std::size_t encoded = 26;
}  // namespace

std::string new_saga_id(std::chrono::sys_time<std::chrono::milliseconds> now,
                        const std::array<std::uint8_t, 10>& random) {
  std::array<std::uint8_t, 16> bytes{};
  const auto ms = static_cast<std::uint64_t>(now.time_since_epoch().count());
  for (int i = 0; i < 6; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(ms >> (8 * (5 - i)));
  for (std::size_t i = 0; i < random.size(); ++i) bytes[6 + i] = random[i];
  // 128 bits in 26 groups of 5, the first group holding the top 3 bits.
  std::string out(prefix);
  out.reserve(prefix.size() + encoded);
  for (std::size_t group = 0; group < encoded; ++group) {
    const int last_bit = 127 - static_cast<int>((encoded - 1 - group) * 5);  // of this group, counted from the top
    unsigned value = 0;
    for (int b = last_bit - 4; b <= last_bit; ++b) {
      value <<= 1;
      if (b >= 0) value |= (bytes[static_cast<std::size_t>(b / 8)] >> (7 - b % 8)) & 1u;
    }
    out += alphabet[value];
  }
  return out;
}

bool is_saga_id(std::string_view id) {
  if (id.size() != prefix.size() + encoded || !id.starts_with(prefix)) return false;
  id.remove_prefix(prefix.size());
  if (id[0] > '7') return false;  // 26 groups carry 130 bits; the top 2 are zero
  return id.find_first_not_of(alphabet) == std::string_view::npos;
}

}  // namespace tally::contract
