#include "account_shard/ledger/reconcile.hpp"

#include <map>

#include <nlohmann/json.hpp>

namespace tally::shard {

bool account_reconciliation::needs_freeze() const {
  if (difference != 0) return true;
  for (const auto& f : findings)
    if (f.kind == "held_mismatch" || f.kind == "duplicate" || f.kind == "lot_mismatch") return true;
  return false;
}

account_reconciliation reconcile_account(std::string tenant, std::string account_id, std::int64_t snapshot,
                                         std::int64_t writes_after_watermark, std::int64_t held,
                                         std::int64_t open_holds, const std::vector<entry_view>& entries,
                                         std::vector<finding> lot_findings) {
  account_reconciliation r{std::move(tenant), std::move(account_id), snapshot, 0, 0, writes_after_watermark, {}};
  bool has_opening = false;
  std::map<std::pair<std::string, std::string>, int> seen;
  std::int64_t explained = 0;
  for (const auto& e : entries) {
    r.rebuilt += e.delta;
    if (e.biz_type == "open_account") has_opening = true;
    if (++seen[{e.biz_type, e.biz_id}] > 1) {
      r.findings.push_back({"duplicate", e.delta, e.biz_type, e.biz_id, e.seq});
      explained += e.delta;
    }
    if (e.reverses) r.findings.push_back({"reversal", e.delta, e.biz_type, e.biz_id, e.seq});
  }
  if (!has_opening) r.findings.push_back({"missing_opening", 0, "", "", std::nullopt});
  r.difference = r.rebuilt - r.snapshot;
  if (r.difference != explained) r.findings.push_back({"unexplained", r.difference - explained, "", "", std::nullopt});
  if (held != open_holds) r.findings.push_back({"held_mismatch", held - open_holds, "", "", std::nullopt});
  for (auto& f : lot_findings) r.findings.push_back(std::move(f));
  return r;
}

void find_lot_mismatches(const lot_view& lot, std::vector<finding>& out) {
  auto mismatch = [&](std::int64_t amount) {
    out.push_back({"lot_mismatch", amount, "lot", std::to_string(lot.lot_id), std::nullopt});
  };
  if (lot.history_read && lot.remaining != lot.ops_remaining) mismatch(lot.remaining - lot.ops_remaining);
  if (lot.held != lot.holds_held) mismatch(lot.held - lot.holds_held);
  if (!lot.history_read) return;
  if (lot.expired != lot.expired_by_ops) mismatch(lot.expired - lot.expired_by_ops);
  // The expiry job writes one entry per expired lot, and none for another.
  if (lot.expire_entries != (lot.is_expired ? 1 : 0)) mismatch(0);
}

checkpoint next_checkpoint(const checkpoint& previous, bool agrees, std::int64_t last_seq, std::int64_t rebuilt) {
  if (!agrees) return {previous.seq, previous.balance, false};
  if (previous.clean && last_seq < previous.seq) return previous;  // a run at an older watermark
  return {last_seq, rebuilt, true};
}

nlohmann::json to_json(const account_reconciliation& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : r.findings) {
    nlohmann::json j = {{"class", f.kind}, {"amount", f.amount}};
    if (!f.biz_type.empty()) j["biz_type"] = f.biz_type;
    if (!f.biz_id.empty()) j["biz_id"] = f.biz_id;
    if (f.seq) j["seq"] = *f.seq;
    findings.push_back(std::move(j));
  }
  return {{"tenant", r.tenant},
          {"account_id", r.account_id},
          {"snapshot", r.snapshot},
          {"rebuilt", r.rebuilt},
          {"difference", r.difference},
          {"writes_after_watermark", r.writes_after_watermark},
          {"findings", std::move(findings)}};
}

nlohmann::json class_counts(const std::vector<account_reconciliation>& differing) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& d : differing)
    for (const auto& f : d.findings) out[f.kind] = out.value(f.kind, 0) + 1;
  return out;
}

}  // namespace tally::shard
