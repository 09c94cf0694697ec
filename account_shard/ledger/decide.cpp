#include "account_shard/ledger/decide.hpp"

#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "common/contract/enum_names.hpp"
#include "common/invariant/invariant.hpp"
#include "common/contract/account_document.hpp"

namespace tally::shard {

std::optional<account_status> account_status_from(std::string_view s) {
  return contract::value_of(account_status_names, s);
}
std::optional<hold_state> hold_state_from(std::string_view s) { return contract::value_of(hold_state_names, s); }

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
  contract::account_document doc{a.tenant,  a.account_id, a.balance, a.held, std::string(to_string(a.status)),
                                 a.version, std::nullopt, 0};
  if (auto account_lots = lots.find(account_key(a.tenant, a.account_id)); account_lots != lots.end())
    std::tie(doc.next_expiry_at, doc.next_expiry_amount) = next_expiry_of(account_lots->second);
  const auto payload = contract::event_payload(doc, {std::string(to_string(c.kind)), c.biz_id});
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

reply batch_state::replay(const command& c, const operation_row& op) {
  if (op.state == op_state::cancelled) return from_operation(op, c.kind, c.kind == command_kind::cancel_key);
  if (c.kind == command_kind::cancel_key) {
    reply r = from_operation(op, c.kind, false);
    r.status = reply_status::already_applied;
    r.applied = contract::applied_outcome{op.state, op.amount, op.reason};
    r.code.reset();
    return r;
  }
  if (op.request_hash != c.request_hash) {
    reply r;
    r.status = reply_status::conflict;
    r.code = shard_code::idempotency_conflict;
    r.kind = c.kind;
    r.biz_id = c.biz_id;
    return r;
  }
  return from_operation(op, c.kind, true);
}

reply batch_state::finish(decision& d, op_state state, std::optional<shard_code> reason) {
  d.op.state = state;
  d.op.reason = reason;
  if (d.a) {
    d.op.balance_after = d.a->balance;
    d.op.held_after = d.a->held;
    d.op.version_after = d.a->version;
  }
  reply r = from_operation(d.op, d.c.kind, false);
  record(std::move(d.op));
  return r;
}

reply batch_state::retry(const command& c, shard_code code) {
  reply r;
  r.status = reply_status::retry;
  r.code = code;
  r.kind = c.kind;
  r.biz_id = c.biz_id;
  return r;
}

reply batch_state::decide_open_account(decision& d) {
  const command& c = d.c;
  if (!d.a) {
    account_row fresh{c.tenant, c.account_id, 0, 0, account_status::active, 0, true, true};
    d.a = &accounts.emplace(account_key(c.tenant, c.account_id), std::move(fresh)).first->second;
    emit(*d.a, "account.opened", c);
    d.op.ledger_seq = take_seq();
    // The opening entry is the ledger's baseline for reconciliation.
    ledger.push_back({*d.op.ledger_seq, d.op.key, 0, 0, std::nullopt});
  }
  return finish(d, op_state::succeeded);
}

batch_state::figures batch_state::figures_of(const std::string& account) const {
  figures f;
  if (auto a = accounts.find(account); a != accounts.end()) {
    f.balance = a->second.balance;
    f.held = a->second.held;
  }
  if (auto l = lots.find(account); l != lots.end()) {
    for (const auto& lot : l->second) {
      f.lots_remaining += lot.remaining;
      f.lots_held += lot.held;
    }
  }
  return f;
}

void batch_state::check_invariants(const command& c, const std::string& account, const figures& before) const {
  if (auto it = accounts.find(account); it != accounts.end()) {
    const account_row& a = it->second;
    TALLY_ASSERT(0 <= a.held && a.held <= a.balance, account, a.balance, a.held);
  }
  if (auto it = lots.find(account); it != lots.end()) {
    for (const auto& l : it->second) {
      TALLY_ASSERT(0 <= l.held && l.held <= l.remaining, account, l.lot_id, l.held, l.remaining);
      TALLY_ASSERT(0 <= l.expired && l.remaining + l.expired <= l.granted, account, l.lot_id, l.remaining, l.expired,
                   l.granted);
    }
  }
  if (auto it = holds.find(hold_key(c.tenant, c.account_id, c.biz_id)); it != holds.end()) {
    const hold_row& h = it->second;
    TALLY_ASSERT(0 <= h.captured && h.captured <= h.amount, account, c.biz_id, h.captured, h.amount);
    TALLY_ASSERT((h.state == hold_state::captured) == (h.captured > 0), account, c.biz_id, to_string(h.state),
                 h.captured);
  }
  const figures after = figures_of(account);
  TALLY_ASSERT(after.balance - before.balance == after.lots_remaining - before.lots_remaining, account, c.biz_id,
               before.balance, after.balance, before.lots_remaining, after.lots_remaining);
  TALLY_ASSERT(after.held - before.held == after.lots_held - before.lots_held, account, c.biz_id, before.held,
               after.held, before.lots_held, after.lots_held);
}

reply batch_state::decide(const command& c) {
  decision d{c, {}, nullptr};
  d.op.key = c.key();
  if (auto it = operations.find(d.op.key.flat()); it != operations.end()) return replay(c, it->second);
  d.op.request_hash = c.request_hash;
  const auto account = account_key(c.tenant, c.account_id);
  const figures before = figures_of(account);
  reply r = decide_command(d);
  check_invariants(c, account, before);
  return r;
}

reply batch_state::decide_command(decision& d) {
  const command& c = d.c;

  if (c.kind == command_kind::cancel_key) return finish(d, op_state::cancelled);
  if (auto it = accounts.find(account_key(c.tenant, c.account_id)); it != accounts.end()) d.a = &it->second;
  if (c.kind == command_kind::open_account) return decide_open_account(d);
  if (c.kind == command_kind::release) {
    auto hk = hold_key(c.tenant, c.account_id, c.biz_id);
    if (!holds.contains(hk)) {
      // Released before its hold arrived: a tombstone refuses the late hold.
      holds.emplace(hk, hold_row{c.tenant, c.account_id, c.biz_id, 0, 0, hold_state::released, true, true});
      return finish(d, op_state::succeeded);
    }
  }

  if (!d.a) return finish(d, op_state::rejected, shard_code::account_not_found);
  if (d.a->status == account_status::frozen) return retry(c, shard_code::account_frozen);
  if (d.a->status == account_status::closed) return finish(d, op_state::rejected, shard_code::account_closed);

  switch (c.kind) {
    case command_kind::credit: return decide_credit(d);
    case command_kind::debit: return decide_debit(d);
    case command_kind::hold: return decide_hold(d);
    case command_kind::capture: return decide_capture(d);
    case command_kind::release: return decide_release(d);
    case command_kind::refund: return decide_refund(d);
    case command_kind::expire: return decide_expire(d);
    case command_kind::open_account:
    case command_kind::cancel_key: break;
  }
  throw std::logic_error("unhandled command kind");
}

std::pair<std::optional<std::int64_t>, std::int64_t> next_expiry_of(const std::vector<lot_row>& lots) {
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
  return {at, amount};
}

}  // namespace tally::shard
