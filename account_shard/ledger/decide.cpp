#include "account_shard/ledger/decide.hpp"

#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/contract/enum_names.hpp"
#include "common/projection/next_expiry.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::shard {

namespace {
constexpr contract::enum_names<account_status, 3> account_status_names{
    {{account_status::active, "active"}, {account_status::frozen, "frozen"}, {account_status::closed, "closed"}}};
constexpr contract::enum_names<op_state, 3> op_state_names{
    {{op_state::succeeded, "succeeded"}, {op_state::rejected, "rejected"}, {op_state::cancelled, "cancelled"}}};
constexpr contract::enum_names<hold_state, 3> hold_state_names{
    {{hold_state::held, "held"}, {hold_state::captured, "captured"}, {hold_state::released, "released"}}};
constexpr contract::enum_names<reply_status, 6> reply_status_names{{{reply_status::succeeded, "succeeded"},
                                                                    {reply_status::rejected, "rejected"},
                                                                    {reply_status::conflict, "conflict"},
                                                                    {reply_status::cancelled, "cancelled"},
                                                                    {reply_status::already_applied, "already_applied"},
                                                                    {reply_status::retry, "retry"}}};

bool add_overflows(std::int64_t a, std::int64_t b) { return a > std::numeric_limits<std::int64_t>::max() - b; }
}  // namespace

std::string_view to_string(account_status s) { return contract::name_of(account_status_names, s); }
std::optional<account_status> account_status_from(std::string_view s) {
  return contract::value_of(account_status_names, s);
}
std::string_view to_string(op_state s) { return contract::name_of(op_state_names, s); }
std::optional<op_state> op_state_from(std::string_view s) { return contract::value_of(op_state_names, s); }
std::string_view to_string(hold_state s) { return contract::name_of(hold_state_names, s); }
std::optional<hold_state> hold_state_from(std::string_view s) { return contract::value_of(hold_state_names, s); }
std::string_view to_string(reply_status s) { return contract::name_of(reply_status_names, s); }

std::string batch_state::account_key(std::string_view tenant, std::string_view account) {
  std::string k(tenant);
  k += '\x1f';
  k += account;
  return k;
}

std::string batch_state::hold_key(std::string_view tenant, std::string_view account, std::string_view hold) {
  std::string k = account_key(tenant, account);
  k += '\x1f';
  k += hold;
  return k;
}

std::int64_t batch_state::take_seq() {
  // The store reserves one sequence number per command, so this never runs out.
  if (next_seq >= free_seqs.size()) throw std::logic_error("ledger sequence numbers exhausted");
  return free_seqs[next_seq++];
}

void batch_state::record(operation_row op) {
  op.is_new = true;
  op.dirty = true;
  auto flat = op.key.flat();
  operations.insert_or_assign(std::move(flat), std::move(op));
}

void batch_state::emit(account_row& a, std::string_view type, const command& c) {
  a.version += 1;
  a.dirty = true;
  nlohmann::json payload = {
      {"tenant", a.tenant},
      {"account_id", a.account_id},
      {"balance", a.balance},
      {"held", a.held},
      {"available", a.balance - a.held},
      {"status", to_string(a.status)},
      {"version", a.version},
      {"cause", {{"type", to_string(c.kind)}, {"biz_id", c.biz_id}}},
  };
  auto account_lots = lots.find(account_key(a.tenant, a.account_id));
  payload["next_expiry"] =
      account_lots == lots.end() ? nlohmann::json(nullptr) : next_expiry_json(account_lots->second);
  events.push_back({a.tenant, a.account_id, a.version, std::string(type), payload.dump()});
}

lot_row* batch_state::find_lot(const account_row& a, std::int64_t lot_id) {
  auto it = lots.find(account_key(a.tenant, a.account_id));
  if (it == lots.end()) return nullptr;
  for (auto& l : it->second)
    if (l.lot_id == lot_id) return &l;
  return nullptr;
}

lot_row* batch_state::lot_on_same_terms(const account_row& a, const lot_part& part) {
  auto it = lots.find(account_key(a.tenant, a.account_id));
  if (it == lots.end()) return nullptr;
  for (auto& l : it->second) {
    if (l.state == lot_state::open && !l.grace_ms && l.origin != lot_origin::refund && !l.due_at(now_ms) &&
        l.expires_at == part.expires_at && l.rule_version == part.rule_version &&
        !add_overflows(l.granted, part.amount))
      return &l;
  }
  return nullptr;
}

lot_part batch_state::grant_lot(account_row& a, const lot_part& part, lot_origin origin, const command& c) {
  if (origin == lot_origin::grant || origin == lot_origin::transfer) {
    if (lot_row* same = lot_on_same_terms(a, part)) {
      same->granted += part.amount;
      same->remaining += part.amount;
      same->dirty = true;
      return {same->lot_id, part.amount, same->expires_at, same->rule_version};
    }
  }
  lot_row l;
  l.tenant = a.tenant;
  l.account_id = a.account_id;
  l.lot_id = ++a.lot_count;
  l.granted = l.remaining = part.amount;
  l.expires_at = part.expires_at;
  l.rule_version = part.rule_version;
  l.origin = origin;
  l.source_type = to_string(c.kind);
  l.source_id = c.biz_id;
  l.dirty = l.is_new = true;
  lots[account_key(a.tenant, a.account_id)].push_back(l);
  return {l.lot_id, l.granted, l.expires_at, l.rule_version};
}

std::optional<std::vector<lot_part>> batch_state::allocate_from(const account_row& a, std::int64_t amount) {
  std::vector<const lot_row*> candidates;
  if (auto it = lots.find(account_key(a.tenant, a.account_id)); it != lots.end())
    for (const auto& l : it->second) candidates.push_back(&l);
  return allocate(candidates, amount, now_ms);
}

std::vector<lot_part> batch_state::held_parts(const command& c) const {
  auto it = operations.find(op_key{c.tenant, c.account_id, "hold", c.biz_id}.flat());
  return it == operations.end() ? std::vector<lot_part>{} : it->second.lots;
}

std::vector<lot_part> batch_state::refund_to_lots(account_row& a, const operation_row& original, const command& c,
                                                  std::int64_t amount) {
  std::vector<lot_part> out;
  std::int64_t regrant = 0;
  std::string regrant_rule = "1";
  // An original from before lots existed names none: its refund is a new,
  // non-expiring lot.
  if (original.lots.empty()) return {grant_lot(a, {0, amount, std::nullopt, "1"}, lot_origin::refund, c)};
  for (const auto& p : refund_parts(original.lots, original.refunded, amount)) {
    lot_row* l = find_lot(a, p.lot_id);
    if (!l) throw std::logic_error("a refund's original names a lot the batch did not read");
    if (l->state == lot_state::expired || l->due_at(now_ms)) {
      if (regrant == 0) regrant_rule = l->rule_version;
      regrant += p.amount;
      continue;
    }
    l->remaining += p.amount;
    if (l->state == lot_state::exhausted) l->state = lot_state::open;
    l->dirty = true;
    out.push_back(p);
  }
  if (regrant > 0) {
    // The part whose lot has expired goes into a new lot that expires
    // refund.expired_lot_grace from now; the lot records that rule.
    auto part = grant_lot(a, {0, regrant, now_ms + refund_grace_ms, regrant_rule}, lot_origin::refund, c);
    lots[account_key(a.tenant, a.account_id)].back().grace_ms = refund_grace_ms;
    out.push_back(part);
  }
  return out;
}

std::vector<lot_part> batch_state::release_parts(account_row& a, const std::vector<lot_part>& parts) {
  std::vector<lot_part> expired;
  for (const auto& p : parts) {
    lot_row* l = find_lot(a, p.lot_id);
    if (!l) throw std::logic_error("a hold names a lot the batch did not read");
    l->held -= p.amount;
    l->dirty = true;
    if (l->state != lot_state::expired) continue;
    // Its lot expired while held: the part expires now.
    l->remaining -= p.amount;
    l->expired += p.amount;
    a.balance -= p.amount;
    expired.push_back(p);
  }
  return expired;
}

void batch_state::record_release_expiry(account_row& a, const command& c, std::vector<lot_part> expired) {
  if (expired.empty()) return;
  std::int64_t total = 0;
  for (const auto& p : expired) total += p.amount;
  operation_row op;
  op.key = {c.tenant, c.account_id, "expire", "hold:" + c.biz_id};
  op.request_hash = c.request_hash;
  op.amount = total;
  op.ledger_seq = take_seq();
  op.lots = std::move(expired);
  // Its balance_after is the one after the whole command (the caller's
  // figures); the entry's is right after this expiry.
  ledger.push_back({*op.ledger_seq, op.key, -total, a.balance, std::nullopt});
  op.balance_after = a.balance;
  op.held_after = a.held;
  op.version_after = a.version + 1;
  record(std::move(op));
}

namespace {

reply from_operation(const operation_row& op, command_kind kind, bool replayed) {
  reply r;
  r.kind = kind;
  r.biz_id = op.key.biz_id;
  r.replayed = replayed;
  r.amount = op.amount;
  r.balance_after = op.balance_after;
  r.held_after = op.held_after;
  r.version = op.version_after;
  r.ledger_seq = op.ledger_seq;
  r.code = op.reason;
  r.lots = op.lots;
  r.status = op.state == op_state::succeeded  ? reply_status::succeeded
             : op.state == op_state::rejected ? reply_status::rejected
                                              : reply_status::cancelled;
  return r;
}

}  // namespace

reply batch_state::decide(const command& c) {
  const op_key key = c.key();
  if (auto it = operations.find(key.flat()); it != operations.end()) {
    const operation_row& op = it->second;
    if (op.state == op_state::cancelled) return from_operation(op, c.kind, c.kind == command_kind::cancel_key);
    if (c.kind == command_kind::cancel_key) {
      reply r = from_operation(op, c.kind, false);
      r.status = reply_status::already_applied;
      r.applied_state = op.state;
      r.applied_code = op.reason;
      r.code.clear();
      return r;
    }
    if (op.request_hash != c.request_hash) {
      reply r;
      r.status = reply_status::conflict;
      r.code = "idempotency_conflict";
      r.kind = c.kind;
      r.biz_id = c.biz_id;
      return r;
    }
    return from_operation(op, c.kind, true);
  }

  operation_row op;
  op.key = key;
  op.request_hash = c.request_hash;
  auto retry = [&](std::string code) {
    reply r;
    r.status = reply_status::retry;
    r.code = std::move(code);
    r.kind = c.kind;
    r.biz_id = c.biz_id;
    return r;
  };
  auto finish = [&](op_state state, std::string reason, const account_row* a) {
    op.state = state;
    op.reason = std::move(reason);
    if (a) {
      op.balance_after = a->balance;
      op.held_after = a->held;
      op.version_after = a->version;
    }
    reply r = from_operation(op, c.kind, false);
    record(std::move(op));
    return r;
  };

  if (c.kind == command_kind::cancel_key) return finish(op_state::cancelled, "", nullptr);

  auto acc_it = accounts.find(account_key(c.tenant, c.account_id));
  account_row* a = acc_it == accounts.end() ? nullptr : &acc_it->second;

  if (c.kind == command_kind::open_account) {
    if (!a) {
      account_row fresh{c.tenant, c.account_id, 0, 0, account_status::active, 0, true, true};
      a = &accounts.emplace(account_key(c.tenant, c.account_id), std::move(fresh)).first->second;
      emit(*a, "account.opened", c);
      op.ledger_seq = take_seq();
      // The opening entry is the ledger's baseline for reconciliation.
      ledger.push_back({*op.ledger_seq, key, 0, 0, std::nullopt});
    }
    return finish(op_state::succeeded, "", a);
  }

  if (c.kind == command_kind::release) {
    auto hk = hold_key(c.tenant, c.account_id, c.biz_id);
    auto h = holds.find(hk);
    if (h == holds.end()) {
      // Released before its hold arrived: a tombstone refuses the late hold.
      holds.emplace(hk, hold_row{c.tenant, c.account_id, c.biz_id, 0, 0, hold_state::released, true, true});
      return finish(op_state::succeeded, "", a);
    }
  }

  if (!a) return finish(op_state::rejected, "account_not_found", nullptr);
  if (a->status == account_status::frozen) return retry("account_frozen");
  if (a->status == account_status::closed) return finish(op_state::rejected, "account_closed", a);

  switch (c.kind) {
    case command_kind::credit: {
      if (add_overflows(a->balance, c.amount)) return finish(op_state::rejected, "balance_overflow", a);
      a->balance += c.amount;
      op.amount = c.amount;
      if (c.lots.empty()) {
        op.lots.push_back(grant_lot(*a, {0, c.amount, c.expires_at, c.rule_version}, lot_origin::grant, c));
      } else {
        for (const auto& part : c.lots) op.lots.push_back(grant_lot(*a, part, lot_origin::transfer, c));
      }
      op.ledger_seq = take_seq();
      ledger.push_back({*op.ledger_seq, key, c.amount, a->balance, std::nullopt});
      emit(*a, "account.credited", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::debit: {
      if (a->balance - a->held < c.amount) return finish(op_state::rejected, "insufficient_funds", a);
      auto parts = allocate_from(*a, c.amount);
      if (!parts) return finish(op_state::rejected, "insufficient_funds", a);
      for (const auto& p : *parts) {
        lot_row* l = find_lot(*a, p.lot_id);
        l->remaining -= p.amount;
        if (l->remaining == 0) l->state = lot_state::exhausted;
        l->dirty = true;
      }
      op.lots = std::move(*parts);
      a->balance -= c.amount;
      op.amount = c.amount;
      op.ledger_seq = take_seq();
      ledger.push_back({*op.ledger_seq, key, -c.amount, a->balance, std::nullopt});
      emit(*a, "account.debited", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::hold: {
      auto hk = hold_key(c.tenant, c.account_id, c.biz_id);
      if (holds.contains(hk)) return finish(op_state::rejected, "hold_released", a);  // a tombstone
      if (a->balance - a->held < c.amount) return finish(op_state::rejected, "insufficient_funds", a);
      auto parts = allocate_from(*a, c.amount);
      if (!parts) return finish(op_state::rejected, "insufficient_funds", a);
      for (const auto& p : *parts) {
        lot_row* l = find_lot(*a, p.lot_id);
        l->held += p.amount;
        l->dirty = true;
      }
      op.lots = std::move(*parts);
      a->held += c.amount;
      op.amount = c.amount;
      holds.emplace(hk, hold_row{c.tenant, c.account_id, c.biz_id, c.amount, 0, hold_state::held, true, true});
      emit(*a, "account.held", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::capture: {
      auto h = holds.find(hold_key(c.tenant, c.account_id, c.biz_id));
      if (h == holds.end()) return retry("hold_not_found");
      hold_row& hold = h->second;
      if (hold.state == hold_state::released) return finish(op_state::rejected, "hold_released", a);
      if (hold.state == hold_state::captured) return finish(op_state::rejected, "hold_captured", a);
      std::int64_t take = c.amount == 0 ? hold.amount : c.amount;
      if (take > hold.amount) return finish(op_state::rejected, "capture_exceeds_hold", a);
      // A partial capture releases the rest of the hold.
      auto split = split_capture(held_parts(c), take);
      for (const auto& p : split.consumed) {
        lot_row* l = find_lot(*a, p.lot_id);
        if (!l) throw std::logic_error("a hold names a lot the batch did not read");
        l->held -= p.amount;
        l->remaining -= p.amount;
        if (l->remaining == 0 && l->state == lot_state::open) l->state = lot_state::exhausted;
        l->dirty = true;
      }
      a->held -= hold.amount;
      a->balance -= take;
      hold.captured = take;
      hold.state = hold_state::captured;
      hold.dirty = true;
      op.amount = take;
      op.lots = std::move(split.consumed);
      op.ledger_seq = take_seq();
      ledger.push_back({*op.ledger_seq, key, -take, a->balance, std::nullopt});
      record_release_expiry(*a, c, release_parts(*a, split.released));
      emit(*a, "account.captured", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::release: {
      hold_row& hold = holds.find(hold_key(c.tenant, c.account_id, c.biz_id))->second;
      if (hold.state == hold_state::captured) return finish(op_state::rejected, "hold_captured", a);
      if (hold.state == hold_state::held) {
        a->held -= hold.amount;
        record_release_expiry(*a, c, release_parts(*a, held_parts(c)));
        op.amount = hold.amount;
        hold.state = hold_state::released;
        hold.dirty = true;
        emit(*a, "account.released", c);
      }
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::refund: {
      auto orig_it = operations.find(c.target_key().flat());
      // Never credit on a guess: an original not yet visible is retried.
      if (orig_it == operations.end()) return retry("original_not_found");
      operation_row& orig = orig_it->second;
      if (orig.state != op_state::succeeded) return finish(op_state::rejected, "original_not_succeeded", a);
      // Without an amount: what is left of the original, decided here under
      // its lock, so concurrent revokes never give back a unit twice. When
      // nothing is left the refund succeeds with nothing to write.
      const std::int64_t give = c.amount == 0 ? orig.amount - orig.refunded : c.amount;
      if (give == 0) return finish(op_state::succeeded, "", a);
      if (orig.refunded + give > orig.amount) return finish(op_state::rejected, "refund_exceeds_original", a);
      if (add_overflows(a->balance, give)) return finish(op_state::rejected, "balance_overflow", a);
      op.lots = refund_to_lots(*a, orig, c, give);
      orig.refunded += give;
      orig.dirty = true;
      a->balance += give;
      op.amount = give;
      op.ledger_seq = take_seq();
      ledger.push_back({*op.ledger_seq, key, give, a->balance, orig.ledger_seq});
      emit(*a, "account.refunded", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::expire: {
      lot_row* l = find_lot(*a, *lot_id_of(c.biz_id));
      if (!l || l->state != lot_state::open || !l->due_at(now_ms)) return retry("lot_not_due");
      std::int64_t gone = l->available();
      l->remaining -= gone;
      l->expired += gone;
      l->state = lot_state::expired;
      l->dirty = true;
      a->balance -= gone;
      op.amount = gone;
      op.lots.push_back({l->lot_id, gone, l->expires_at, l->rule_version});
      op.ledger_seq = take_seq();
      ledger.push_back({*op.ledger_seq, key, -gone, a->balance, std::nullopt});
      emit(*a, "account.expired", c);
      return finish(op_state::succeeded, "", a);
    }
    case command_kind::open_account:
    case command_kind::cancel_key: break;
  }
  throw std::logic_error("unhandled command kind");
}

std::string reply_json(const reply& r) {
  nlohmann::json j = {{"status", to_string(r.status)}, {"command", to_string(r.kind)}, {"biz_id", r.biz_id}};
  if (!r.code.empty()) j["code"] = r.code;
  if (r.status == reply_status::conflict || r.status == reply_status::retry) return j.dump();
  j["replayed"] = r.replayed;
  if (r.status == reply_status::already_applied) {
    j["applied"] = {{"state", to_string(*r.applied_state)}, {"amount", r.amount}};
    if (!r.applied_code.empty()) j["applied"]["code"] = r.applied_code;
  }
  if (r.status == reply_status::cancelled) return j.dump();
  j["amount"] = r.amount;
  j["balance_after"] = r.balance_after;
  j["held_after"] = r.held_after;
  j["version"] = r.version;
  j["ledger_seq"] = r.ledger_seq ? nlohmann::json(*r.ledger_seq) : nlohmann::json(nullptr);
  if (r.status == reply_status::succeeded && !r.lots.empty()) {
    auto parts = nlohmann::json::array();
    for (const auto& p : r.lots)
      parts.push_back(
          {{"lot_id", p.lot_id},
           {"amount", p.amount},
           {"expires_at", p.expires_at ? nlohmann::json(time::rfc3339_ms(*p.expires_at)) : nlohmann::json()},
           {"rule_version", p.rule_version}});
    j["lots"] = std::move(parts);
  }
  return j.dump();
}

nlohmann::json next_expiry_json(const std::vector<lot_row>& lots) {
  std::optional<std::int64_t> at;
  std::int64_t amount = 0;
  for (const auto& l : lots) {
    if (l.state != lot_state::open || !l.expires_at || l.available() == 0) continue;
    if (!at || *l.expires_at < *at) {
      at = l.expires_at;
      amount = 0;
    }
    if (*l.expires_at == *at) amount += l.available();
  }
  return projection::next_expiry_doc(at, amount);
}

}  // namespace tally::shard
