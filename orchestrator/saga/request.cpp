#include "orchestrator/saga/request.hpp"

#include <algorithm>

namespace tally::orch {

saga_request to_saga_request(contract::saga_request r) {
  saga_request q;
  q.type = r.type;
  q.tenant = std::move(r.tenant);
  q.biz_id = std::move(r.biz_id);
  q.timeout = r.timeout;
  q.request_hash = std::move(r.request_hash);
  auto& in = q.input;
  in.account = std::move(r.account);
  in.source = std::move(r.source);
  in.destination = std::move(r.destination);
  in.amount = r.amount;
  in.memo = std::move(r.memo);
  in.expires_at = r.expires_at;
  in.rule_version = std::move(r.rule_version);
  in.hold_timeout = r.hold_timeout;
  in.items = std::move(r.items);
  in.original_saga_id = std::move(r.original_saga_id);
  switch (r.type) {
    case saga_type::credit: q.workflow = "credit"; break;
    case saga_type::deduct: q.workflow = in.hold_timeout ? "deduct_held" : "deduct"; break;
    // Which workflow runs, and against which accounts, depends on the
    // original: resolve_refund decides once it is loaded.
    case saga_type::refund: q.workflow = "refund"; break;
    case saga_type::transfer: q.workflow = "transfer"; break;
    case saga_type::batch_deduct: q.workflow = "batch_deduct"; break;
  }
  return q;
}

std::variant<saga_request, invalid_request> saga_request_from_body(saga_type type, std::string_view tenant,
                                                                   const nlohmann::json& body) {
  auto parsed = contract::parse_saga_request(type, tenant, body);
  if (auto* bad = std::get_if<invalid_request>(&parsed)) return std::move(*bad);
  return to_saga_request(std::get<contract::saga_request>(std::move(parsed)));
}

std::optional<refund_refusal> resolve_refund(saga_request& r, const saga& original, saga_type original_type) {
  using reason = refund_refusal::reason;
  const auto& o = original.input;
  if (!contract::is_refundable(original_type))
    return refund_refusal{reason::invalid_state, "only a deduction, a transfer or a batch deduction can be refunded"};
  if (original.state != saga_state::completed)
    return refund_refusal{reason::invalid_state, "the original saga has not completed"};
  auto& in = r.input;
  const std::string named = in.account;  // the request's account_id, if any
  auto no_item = [&] {
    return refund_refusal{reason::not_found, "saga " + original.id + " has no item for account " + named};
  };
  in.original_key = step_key(original);
  if (original_type == saga_type::batch_deduct) {
    in.original_type = "capture";
    if (named.empty()) {
      if (in.amount != 0)
        return refund_refusal{reason::invalid,
                              "amount needs account_id: a batch deduction is refunded one item at a time, or all "
                              "that is left of every item without an amount"};
      r.workflow = "revoke_items";
      for (const auto& item : o.items) in.items.push_back({item.account, 0});  // 0: what is left
      return std::nullopt;
    }
    auto item = std::find_if(o.items.begin(), o.items.end(), [&](const saga_item& i) { return i.account == named; });
    if (item == o.items.end()) return no_item();
    r.workflow = "refund";
    return std::nullopt;
  }
  if (in.amount == 0) return refund_refusal{reason::invalid, "amount is required to refund a deduction or a transfer"};
  const bool transfer = original.workflow == "transfer";
  if (!named.empty() && named != (transfer ? o.source : o.account)) return no_item();
  if (transfer) {
    r.workflow = "refund_transfer";
    in.account = o.source;  // the account refunded, as the view names it
    in.source = o.source;
    in.destination = o.destination;
    in.original_type = "capture";
  } else {
    r.workflow = "refund";
    in.account = o.account;
    in.original_type = original.workflow == "deduct_held" ? "capture" : "debit";
  }
  return std::nullopt;
}

}  // namespace tally::orch
