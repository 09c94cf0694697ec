#include "relay/outbox/retention.hpp"

#include <charconv>
#include <stdexcept>

namespace tally::relay {

namespace {

std::uint64_t xid8_of(const std::string& text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) throw std::invalid_argument("bad xid8 '" + text + "'");
  return v;
}

}  // namespace

std::strong_ordering compare(const cursor& a, const cursor& b) {
  if (auto by_tx = xid8_of(a.tx_id) <=> xid8_of(b.tx_id); by_tx != 0) return by_tx;
  return a.id <=> b.id;
}

std::optional<cursor> prune_bound(std::span<const consumer_position> consumers) {
  std::optional<cursor> lowest;
  for (const auto& c : consumers) {
    if (!c.at) return std::nullopt;
    if (!lowest || compare(*c.at, *lowest) < 0) lowest = c.at;
  }
  return lowest;
}

}  // namespace tally::relay
