#include "orchestrator/transport/shard_call.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tally::orch {

contract::shard_command shard_command(const outgoing_call& c, std::string_view tenant) {
  contract::shard_command out;
  out.kind = shard_kind_of(c.op);
  out.tenant = tenant;
  out.account_id = c.account;
  out.biz_id = c.biz_id;
  out.amount = c.amount;
  switch (c.op) {
    case participant_op::credit:
      out.memo = c.memo;
      for (const auto& l : c.lots) out.lots.push_back({0, l.amount, l.expires_at, l.rule_version});
      if (!c.lots.empty()) break;
      out.expires_at = c.expires_at;
      out.rule_version = c.rule_version;
      break;
    case participant_op::debit: out.memo = c.memo; break;
    case participant_op::hold:
    case participant_op::capture:
    case participant_op::release: break;
    case participant_op::refund:  // without an amount: what is left of the original
      out.target_type = c.original_type;
      out.target_id = c.original_id;
      break;
    case participant_op::cancel_key:
      out.biz_id.clear();
      out.target_type = c.target_type;
      out.target_id = c.target_id;
      break;
  }
  return out;
}

answer answer_from_reply(const contract::shard_reply& r) {
  using status = contract::shard_reply_status;
  auto code_or = [&](std::string_view fallback) {
    return std::string(r.code ? contract::to_string(*r.code) : fallback);
  };
  switch (r.status) {
    case status::succeeded: {
      std::vector<lot_share> lots;
      for (const auto& l : r.lots) lots.push_back({l.amount, l.expires_at, l.rule_version});
      answer a{answer_kind::succeeded, "", std::move(lots)};
      a.amount = r.amount;
      return a;
    }
    case status::rejected: return {answer_kind::rejected, code_or("rejected")};
    case status::conflict: return {answer_kind::conflict, code_or("")};
    case status::cancelled: return {answer_kind::cancelled, ""};
    case status::retry: return {answer_kind::retry, code_or("retry")};
    case status::unavailable: {
      // Not decided: a busy account's refusal (nothing sent to its database)
      // waits the shard's suggested pause; anything else is an unknown outcome.
      if (r.code != contract::shard_code::account_busy) return {answer_kind::transport, code_or("unavailable")};
      answer a{answer_kind::retry, code_or("")};
      a.retry_after = std::chrono::milliseconds(std::clamp<std::int64_t>(r.retry_after_ms, 0, 60'000));
      return a;
    }
    case status::already_applied: {
      if (r.applied->state == contract::operation_state::succeeded) {
        answer a{answer_kind::already_applied_succeeded, ""};
        a.amount = r.applied->amount;
        return a;
      }
      const auto code = r.applied->code ? contract::to_string(*r.applied->code) : contract::to_string(r.applied->state);
      return {answer_kind::already_applied_other, std::string(code)};
    }
  }
  return {answer_kind::transport, "bad_reply"};
}

answer answer_from_result(const nlohmann::json& r) {
  auto reply = contract::parse_shard_reply(r);
  // A reply this version cannot read: ask again later rather than guess.
  if (std::holds_alternative<std::string>(reply)) return {answer_kind::transport, "bad_reply"};
  return answer_from_reply(std::get<contract::shard_reply>(reply));
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
