#include "orchestrator/transport/shard_call.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/time/rfc3339.hpp"

namespace tally::orch {

nlohmann::json shard_command(const outgoing_call& c, std::string_view tenant) {
  nlohmann::json j = {{"type", to_string(c.op)}, {"tenant", tenant}, {"account_id", c.account}};
  switch (c.op) {
    case participant_op::credit:
      j["biz_id"] = c.biz_id;
      j["amount"] = c.amount;
      if (!c.memo.empty()) j["memo"] = c.memo;
      if (!c.lots.empty()) {
        auto lots = nlohmann::json::array();
        for (const auto& l : c.lots) {
          nlohmann::json lot{{"amount", l.amount}, {"rule_version", l.rule_version}};
          if (l.expires_at) lot["expires_at"] = time::rfc3339_ms(*l.expires_at);
          lots.push_back(std::move(lot));
        }
        j["lots"] = std::move(lots);
        break;
      }
      if (c.expires_at) j["expires_at"] = time::rfc3339_ms(*c.expires_at);
      if (!c.rule_version.empty()) j["rule_version"] = c.rule_version;
      break;
    case participant_op::debit:
      j["biz_id"] = c.biz_id;
      j["amount"] = c.amount;
      if (!c.memo.empty()) j["memo"] = c.memo;
      break;
    case participant_op::hold:
      j["biz_id"] = c.biz_id;
      j["amount"] = c.amount;
      break;
    case participant_op::capture:
      j["biz_id"] = c.biz_id;
      if (c.amount > 0) j["amount"] = c.amount;
      break;
    case participant_op::release: j["biz_id"] = c.biz_id; break;
    case participant_op::refund:  // without an amount: what is left of the original
      j["biz_id"] = c.biz_id;
      if (c.amount > 0) j["amount"] = c.amount;
      j["original_type"] = c.original_type;
      j["original_id"] = c.original_id;
      break;
    case participant_op::cancel_key:
      j["target_type"] = c.target_type;
      j["target_id"] = c.target_id;
      break;
  }
  return j;
}

namespace {

// A reply's "lots" ([{amount, expires_at, rule_version}, ...]); parts it cannot read are left out.
std::vector<lot_share> lots_of(const nlohmann::json& r) {
  std::vector<lot_share> out;
  auto lots = r.find("lots");
  if (lots == r.end() || !lots->is_array()) return out;
  for (const auto& l : *lots) {
    if (!l.is_object() || !l.contains("amount") || !l["amount"].is_number_integer()) continue;
    lot_share s;
    s.amount = l["amount"].get<std::int64_t>();
    if (l.contains("expires_at") && l["expires_at"].is_string())
      s.expires_at = time::parse_rfc3339_ms(l["expires_at"].get<std::string>());
    if (l.contains("rule_version") && l["rule_version"].is_string())
      s.rule_version = l["rule_version"].get<std::string>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

answer answer_from_result(const nlohmann::json& r) {
  if (!r.is_object() || !r.contains("status") || !r["status"].is_string()) return {answer_kind::transport, "bad_reply"};
  const auto status = r["status"].get<std::string>();
  const auto code = r.contains("code") && r["code"].is_string() ? r["code"].get<std::string>() : std::string();
  auto amount_in = [](const nlohmann::json& o) {
    auto a = o.find("amount");
    return a != o.end() && a->is_number_integer() ? a->get<std::int64_t>() : std::int64_t{0};
  };
  if (status == "succeeded") {
    answer a{answer_kind::succeeded, "", lots_of(r)};
    a.amount = amount_in(r);
    return a;
  }
  if (status == "rejected") return {answer_kind::rejected, code.empty() ? "rejected" : code};
  if (status == "conflict") return {answer_kind::conflict, code};
  if (status == "cancelled") return {answer_kind::cancelled, ""};
  if (status == "retry") return {answer_kind::retry, code.empty() ? "retry" : code};
  if (status == "unavailable") {
    // Not decided: a busy account's refusal (nothing sent to its database)
    // waits the shard's suggested pause; anything else is an unknown outcome.
    if (code != account_busy_code) return {answer_kind::transport, code.empty() ? "unavailable" : code};
    answer a{answer_kind::retry, code};
    auto after = r.find("retry_after_ms");
    if (after != r.end() && after->is_number_integer())
      a.retry_after = std::chrono::milliseconds(std::clamp<std::int64_t>(after->get<std::int64_t>(), 0, 60'000));
    return a;
  }
  if (status == "already_applied") {
    const auto applied = r.value("applied", nlohmann::json::object());
    const auto state = applied.value("state", std::string());
    if (state == "succeeded") {
      answer a{answer_kind::already_applied_succeeded, ""};
      a.amount = amount_in(applied);
      return a;
    }
    if (state.empty()) return {answer_kind::transport, "bad_reply"};
    return {answer_kind::already_applied_other, applied.value("code", state)};
  }
  // A status this version does not know: ask again later rather than guess.
  return {answer_kind::transport, "bad_reply"};
}

answer answer_from_status(int http_status) {
  switch (http_status) {
    case 0: return {answer_kind::transport, "no_reply"};
    case 503: return {answer_kind::transport, "unavailable"};
    case 401: return {answer_kind::transport, "unauthorized"};
    case 400:
    case 413: return {answer_kind::transport, "batch_refused"};
    default: return {answer_kind::transport, "http_" + std::to_string(http_status)};
  }
}

}  // namespace tally::orch
