// One function per kind of command that moves or holds value: what it
// does to the account, its lots and holds, and the entry and event it
// records (batch_state::decide checks the key, the account and its status
// first, and dispatches here).
#include <stdexcept>

#include "account_shard/ledger/decide.hpp"
#include "common/invariant/invariant.hpp"

namespace tally::shard {

reply batch_state::decide_credit(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  if (add_overflows(a.balance, c.amount)) return finish(d, op_state::rejected, shard_code::balance_overflow);
  a.balance += c.amount;
  d.op.amount = c.amount;
  if (c.lots.empty()) {
    d.op.lots.push_back(grant_lot(a, {0, c.amount, c.expires_at, std::string(c.rule())}, lot_origin::grant, c));
  } else {
    for (const auto& part : c.lots) d.op.lots.push_back(grant_lot(a, part, lot_origin::transfer, c));
  }
  d.op.ledger_seq = take_seq();
  ledger.push_back({*d.op.ledger_seq, d.op.key, c.amount, a.balance, std::nullopt});
  emit(a, "account.credited", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_debit(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  if (a.balance - a.held < c.amount) return finish(d, op_state::rejected, shard_code::insufficient_funds);
  auto parts = allocate_from(a, c.amount);
  if (!parts) return finish(d, op_state::rejected, shard_code::insufficient_funds);
  for (const auto& p : *parts) {
    lot_row* l = find_lot(a, p.lot_id);
    l->remaining -= p.amount;
    if (l->remaining == 0) l->state = lot_state::exhausted;
    l->dirty = true;
  }
  d.op.lots = std::move(*parts);
  a.balance -= c.amount;
  d.op.amount = c.amount;
  d.op.ledger_seq = take_seq();
  ledger.push_back({*d.op.ledger_seq, d.op.key, -c.amount, a.balance, std::nullopt});
  emit(a, "account.debited", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_refund(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  auto orig_it = operations.find(c.target_key().flat());
  // Never credit on a guess: an original not yet visible is retried.
  if (orig_it == operations.end()) return retry(c, shard_code::original_not_found);
  operation_row& orig = orig_it->second;
  if (orig.state != op_state::succeeded) return finish(d, op_state::rejected, shard_code::original_not_succeeded);
  // Without an amount: what is left of the original, decided here under
  // its lock, so concurrent revokes never give back a unit twice. When
  // nothing is left the refund succeeds with nothing to write.
  const std::int64_t give = c.amount == 0 ? orig.amount - orig.refunded : c.amount;
  if (give == 0) return finish(d, op_state::succeeded);
  if (orig.refunded + give > orig.amount) return finish(d, op_state::rejected, shard_code::refund_exceeds_original);
  if (add_overflows(a.balance, give)) return finish(d, op_state::rejected, shard_code::balance_overflow);
  d.op.lots = refund_to_lots(a, orig, c, give);
  orig.refunded += give;
  TALLY_ASSERT(orig.refunded <= orig.amount, orig.key.flat(), orig.refunded, orig.amount);
  orig.dirty = true;
  a.balance += give;
  d.op.amount = give;
  d.op.ledger_seq = take_seq();
  ledger.push_back({*d.op.ledger_seq, d.op.key, give, a.balance, orig.ledger_seq});
  emit(a, "account.refunded", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_expire(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  lot_row* l = find_lot(a, *lot_id_of(c.biz_id));
  if (!l || l->state != lot_state::open || !l->due_at(now_ms)) return retry(c, shard_code::lot_not_due);
  std::int64_t gone = l->available();
  l->remaining -= gone;
  l->expired += gone;
  l->state = lot_state::expired;
  l->dirty = true;
  a.balance -= gone;
  d.op.amount = gone;
  d.op.lots.push_back({l->lot_id, gone, l->expires_at, l->rule_version});
  d.op.ledger_seq = take_seq();
  ledger.push_back({*d.op.ledger_seq, d.op.key, -gone, a.balance, std::nullopt});
  emit(a, "account.expired", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_hold(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  auto hk = hold_key(c.tenant, c.account_id, c.biz_id);
  if (holds.contains(hk)) return finish(d, op_state::rejected, shard_code::hold_released);  // a tombstone
  if (a.balance - a.held < c.amount) return finish(d, op_state::rejected, shard_code::insufficient_funds);
  auto parts = allocate_from(a, c.amount);
  if (!parts) return finish(d, op_state::rejected, shard_code::insufficient_funds);
  for (const auto& p : *parts) {
    lot_row* l = find_lot(a, p.lot_id);
    l->held += p.amount;
    l->dirty = true;
  }
  d.op.lots = std::move(*parts);
  a.held += c.amount;
  d.op.amount = c.amount;
  holds.emplace(hk, hold_row{c.tenant, c.account_id, c.biz_id, c.amount, 0, hold_state::held, true, true});
  emit(a, "account.held", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_capture(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  auto h = holds.find(hold_key(c.tenant, c.account_id, c.biz_id));
  if (h == holds.end()) return retry(c, shard_code::hold_not_found);
  hold_row& hold = h->second;
  if (hold.state == hold_state::released) return finish(d, op_state::rejected, shard_code::hold_released);
  if (hold.state == hold_state::captured) return finish(d, op_state::rejected, shard_code::hold_captured);
  std::int64_t take = c.amount == 0 ? hold.amount : c.amount;
  if (take > hold.amount) return finish(d, op_state::rejected, shard_code::capture_exceeds_hold);
  // A partial capture releases the rest of the hold.
  auto split = split_capture(held_parts(c), take);
  for (const auto& p : split.consumed) {
    lot_row* l = find_lot(a, p.lot_id);
    if (!l) throw std::logic_error("a hold names a lot the batch did not read");
    l->held -= p.amount;
    l->remaining -= p.amount;
    if (l->remaining == 0 && l->state == lot_state::open) l->state = lot_state::exhausted;
    l->dirty = true;
  }
  a.held -= hold.amount;
  a.balance -= take;
  hold.captured = take;
  hold.state = hold_state::captured;
  hold.dirty = true;
  d.op.amount = take;
  d.op.lots = std::move(split.consumed);
  d.op.ledger_seq = take_seq();
  ledger.push_back({*d.op.ledger_seq, d.op.key, -take, a.balance, std::nullopt});
  record_release_expiry(a, c, release_parts(a, split.released));
  emit(a, "account.captured", c);
  return finish(d, op_state::succeeded);
}

reply batch_state::decide_release(decision& d) {
  const command& c = d.c;
  account_row& a = *d.a;
  hold_row& hold = holds.find(hold_key(c.tenant, c.account_id, c.biz_id))->second;
  if (hold.state == hold_state::captured) return finish(d, op_state::rejected, shard_code::hold_captured);
  if (hold.state == hold_state::held) {
    a.held -= hold.amount;
    record_release_expiry(a, c, release_parts(a, held_parts(c)));
    d.op.amount = hold.amount;
    hold.state = hold_state::released;
    hold.dirty = true;
    emit(a, "account.released", c);
  }
  return finish(d, op_state::succeeded);
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

}  // namespace tally::shard
