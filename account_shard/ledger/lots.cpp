#include "account_shard/ledger/lots.hpp"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "common/contract/enum_names.hpp"

namespace tally::shard {

std::optional<lot_state> lot_state_from(std::string_view s) { return contract::value_of(lot_state_names, s); }
std::optional<lot_origin> lot_origin_from(std::string_view s) { return contract::value_of(lot_origin_names, s); }

bool consumed_before(const lot_row& a, const lot_row& b) {
  if (a.expires_at != b.expires_at) {
    if (!a.expires_at) return false;  // non-expiring last
    if (!b.expires_at) return true;
    return *a.expires_at < *b.expires_at;
  }
  return a.lot_id < b.lot_id;
}

std::optional<std::vector<lot_part>> allocate(std::span<const lot_row* const> lots, std::int64_t amount,
                                              std::int64_t now_ms) {
  std::vector<const lot_row*> order(lots.begin(), lots.end());
  std::erase_if(order, [now_ms](const lot_row* l) { return !l->usable_at(now_ms); });
  std::sort(order.begin(), order.end(), [](const lot_row* a, const lot_row* b) { return consumed_before(*a, *b); });
  std::vector<lot_part> parts;
  std::int64_t left = amount;
  for (const lot_row* l : order) {
    if (left == 0) break;
    std::int64_t take = std::min(left, l->available());
    parts.push_back({l->lot_id, take, l->expires_at, l->rule_version});
    left -= take;
  }
  if (left > 0) return std::nullopt;
  return parts;
}

capture_split split_capture(const std::vector<lot_part>& held, std::int64_t take) {
  capture_split out;
  for (const auto& p : held) {
    std::int64_t consumed = std::min(take, p.amount);
    take -= consumed;
    if (consumed > 0) out.consumed.push_back({p.lot_id, consumed, p.expires_at, p.rule_version});
    if (p.amount > consumed) out.released.push_back({p.lot_id, p.amount - consumed, p.expires_at, p.rule_version});
  }
  return out;
}

std::vector<lot_part> refund_parts(const std::vector<lot_part>& consumed, std::int64_t already_refunded,
                                   std::int64_t amount) {
  std::vector<lot_part> out;
  std::int64_t skip = already_refunded;
  for (auto it = consumed.rbegin(); it != consumed.rend() && amount > 0; ++it) {
    std::int64_t open = it->amount;
    std::int64_t skipped = std::min(skip, open);
    skip -= skipped;
    open -= skipped;
    if (open == 0) continue;
    std::int64_t back = std::min(open, amount);
    amount -= back;
    out.push_back({it->lot_id, back, it->expires_at, it->rule_version});
  }
  return out;
}

std::string lots_json(const std::vector<lot_part>& parts) {
  auto j = nlohmann::json::array();
  for (const auto& p : parts)
    j.push_back(
        {p.lot_id, p.amount, p.expires_at ? nlohmann::json(*p.expires_at) : nlohmann::json(nullptr), p.rule_version});
  return j.dump();
}

std::vector<lot_part> lots_from_json(std::string_view text) {
  std::vector<lot_part> out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 4) continue;
    lot_part p;
    p.lot_id = e[0].get<std::int64_t>();
    p.amount = e[1].get<std::int64_t>();
    if (!e[2].is_null()) p.expires_at = e[2].get<std::int64_t>();
    p.rule_version = e[3].get<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tally::shard
