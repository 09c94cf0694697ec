#include "account_shard/store/batch.hpp"

#include <algorithm>
#include <set>

#include "account_shard/store/fence.hpp"
#include "common/failpoint/failpoint.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;
using pg::array_literal;
using pg::param;
using pg::sql_begin;
using pg::sql_commit;

namespace {

// The writers plan each statement below once per connection
// (shard_writer_session_sql), so each must have one good plan whatever the
// tables hold: a probe by key for every element of the batch's arrays. A
// lock is taken in a LATERAL subquery, which its FOR UPDATE keeps from being
// merged into a join, so the probe is the only way in (rows are locked in
// the arrays' order: key order). An update joins its arrays to the table by
// key, and with hash and merge joins off in these sessions a nested loop
// over the arrays probing the primary key is by far the cheapest plan, even
// on empty tables. Each update passes the number of rows it must change to
// expect_rows(), which aborts the transaction on any other count.
constexpr std::string_view sql_lock_accounts =
    "SELECT a.tenant, a.account_id, a.balance, a.held, a.status, a.version, a.lot_count "
    "FROM unnest($1::text[], $2::text[]) AS k(tenant, account_id) CROSS JOIN LATERAL "
    "(SELECT * FROM account a WHERE a.tenant = k.tenant AND a.account_id = k.account_id FOR UPDATE) a";
constexpr std::string_view sql_lock_operations =
    "SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, o.request_hash, o.state, o.amount, o.reason, "
    "o.balance_after, o.held_after, o.version_after, o.ledger_seq, o.refunded, o.lots::text "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(tenant, account_id, biz_type, biz_id) "
    "CROSS JOIN LATERAL (SELECT * FROM operation o WHERE o.tenant = k.tenant AND o.account_id = k.account_id "
    "AND o.biz_type = k.biz_type AND o.biz_id = k.biz_id FOR UPDATE) o";
constexpr std::string_view sql_lock_holds =
    "SELECT h.tenant, h.account_id, h.hold_id, h.amount, h.captured, h.state "
    "FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant, account_id, hold_id) CROSS JOIN LATERAL "
    "(SELECT * FROM hold h WHERE h.tenant = k.tenant AND h.account_id = k.account_id AND h.hold_id = k.hold_id "
    "FOR UPDATE) h";
// A lot's columns as load_lots reads them (expires_at in unix ms).
#define TALLY_LOT_COLUMNS                                                                                    \
  "l.tenant, l.account_id, l.lot_id, l.granted, l.remaining, l.held, l.expired, "                            \
  "(extract(epoch FROM l.expires_at) * 1000)::bigint, l.rule_version, l.origin, l.grace_ms, l.source_type, " \
  "l.source_id, l.state "
// Every open lot of the batch's accounts, each account's in consumption order.
constexpr std::string_view sql_lock_open_lots =
    "SELECT " TALLY_LOT_COLUMNS
    "FROM unnest($1::text[], $2::text[]) AS k(tenant, account_id) CROSS JOIN LATERAL "
    "(SELECT * FROM lot l WHERE l.tenant = k.tenant AND l.account_id = k.account_id AND l.state = 'open' "
    "ORDER BY l.expires_at NULLS LAST, l.lot_id FOR UPDATE) l";
// The lots that operations name (a hold's allocation, a refund's
// original), whatever their state.
constexpr std::string_view sql_lock_named_lots =
    "SELECT " TALLY_LOT_COLUMNS
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(tenant, account_id, biz_type, biz_id) "
    "CROSS JOIN LATERAL (SELECT o.lots FROM operation o WHERE o.tenant = k.tenant AND o.account_id = k.account_id "
    "AND o.biz_type = k.biz_type AND o.biz_id = k.biz_id) o "
    "CROSS JOIN LATERAL jsonb_array_elements(coalesce(o.lots, '[]'::jsonb)) AS e(part) "
    "CROSS JOIN LATERAL (SELECT * FROM lot l WHERE l.tenant = k.tenant AND l.account_id = k.account_id "
    "AND l.lot_id = (e.part->>0)::bigint FOR UPDATE) l";
#undef TALLY_LOT_COLUMNS
constexpr std::string_view sql_reserve_seqs = "SELECT nextval('ledger_seq') FROM generate_series(1, $1::int)";

constexpr std::string_view sql_insert_accounts =
    "INSERT INTO account (tenant, account_id, balance, held, status, version, lot_count) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], "
    "$7::bigint[])";
constexpr std::string_view sql_update_accounts =
    "WITH changed AS (UPDATE account a SET balance = u.balance, held = u.held, status = u.status, version = u.version, "
    "lot_count = u.lot_count, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[]) "
    "AS u(tenant, account_id, balance, held, status, version, lot_count) "
    "WHERE a.tenant = u.tenant AND a.account_id = u.account_id RETURNING 1) "
    "SELECT expect_rows(count(*), $8) FROM changed";
constexpr std::string_view sql_insert_lots =
    "INSERT INTO lot (tenant, account_id, lot_id, granted, remaining, held, expired, expires_at, rule_version, origin, "
    "grace_ms, source_type, source_id, state) "
    "SELECT t, a, id, g, r, h, x, 'epoch'::timestamptz + e * interval '1 millisecond', rv, o, gr, st, si, s "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
    "$8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[]) "
    "AS u(t, a, id, g, r, h, x, e, rv, o, gr, st, si, s)";
constexpr std::string_view sql_update_lots =
    "WITH changed AS (UPDATE lot l SET remaining = u.remaining, held = u.held, expired = u.expired, state = u.state, "
    "updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[]) "
    "AS u(tenant, account_id, lot_id, remaining, held, expired, state) "
    "WHERE l.tenant = u.tenant AND l.account_id = u.account_id AND l.lot_id = u.lot_id RETURNING 1) "
    "SELECT expect_rows(count(*), $8) FROM changed";
constexpr std::string_view sql_insert_operations =
    "INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, "
    "balance_after, held_after, version_after, ledger_seq, refunded, lots) "
    "SELECT t, a, bt, bi, rh, s, am, re, ba, ha, va, ls, rf, l::jsonb "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], "
    "$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[]) "
    "AS u(t, a, bt, bi, rh, s, am, re, ba, ha, va, ls, rf, l)";
constexpr std::string_view sql_update_refunded =
    "WITH changed AS (UPDATE operation o SET refunded = u.refunded "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) "
    "AS u(tenant, account_id, biz_type, biz_id, refunded) "
    "WHERE o.tenant = u.tenant AND o.account_id = u.account_id AND o.biz_type = u.biz_type AND o.biz_id = u.biz_id "
    "RETURNING 1) SELECT expect_rows(count(*), $6) FROM changed";
constexpr std::string_view sql_insert_holds =
    "INSERT INTO hold (tenant, account_id, hold_id, amount, captured, state) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[])";
constexpr std::string_view sql_update_holds =
    "WITH changed AS (UPDATE hold h SET captured = u.captured, state = u.state, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) "
    "AS u(tenant, account_id, hold_id, captured, state) "
    "WHERE h.tenant = u.tenant AND h.account_id = u.account_id AND h.hold_id = u.hold_id "
    "RETURNING 1) SELECT expect_rows(count(*), $6) FROM changed";
constexpr std::string_view sql_insert_ledger =
    "INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses) "
    "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], "
    "$8::bigint[])";
constexpr std::string_view sql_insert_events =
    "INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload) "
    "SELECT t, a, v, e, p::jsonb FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) "
    "AS u(t, a, v, e, p)";

// Column-wise arrays, the shape unnest() takes.
struct columns {
  std::vector<std::vector<std::string>> text;
  std::vector<std::vector<param>> nullable;
  std::vector<std::vector<std::int64_t>> ints;
};

std::vector<param> params_of(std::initializer_list<std::string> arrays) {
  std::vector<param> out;
  for (const auto& a : arrays) out.emplace_back(a);
  return out;
}

param opt_text(const std::string& s) { return s.empty() ? param{} : param{s}; }
param opt_int(const std::optional<std::int64_t>& v) { return v ? param{std::to_string(*v)} : param{}; }

// Where each read's result is in the pipeline's results: [0]=BEGIN
// [1]=fence [2]=epoch [3]=accounts [4]=operations [5]=seqs [6]=open lots,
// then the optional ones (-1 when not sent).
struct read_layout {
  int holds = -1;
  int named_lots = -1;
};

void load_lots(batch_state& st, const pg::result& r, std::set<std::pair<std::string, std::int64_t>>& seen) {
  for (int i = 0; i < r.rows(); ++i) {
    lot_row l;
    l.tenant = r.text(i, 0);
    l.account_id = r.text(i, 1);
    l.lot_id = r.int64(i, 2);
    auto key = batch_state::account_key(l.tenant, l.account_id);
    // A lot both open and named by an operation comes twice.
    if (!seen.emplace(key, l.lot_id).second) continue;
    l.granted = r.int64(i, 3);
    l.remaining = r.int64(i, 4);
    l.held = r.int64(i, 5);
    l.expired = r.int64(i, 6);
    l.expires_at = r.opt_int64(i, 7);
    l.rule_version = r.text(i, 8);
    l.origin = lot_origin_from(r.text(i, 9)).value_or(lot_origin::grant);
    l.grace_ms = r.opt_int64(i, 10);
    l.source_type = r.text(i, 11);
    l.source_id = r.text(i, 12);
    l.state = lot_state_from(r.text(i, 13)).value_or(lot_state::expired);
    st.lots[key].push_back(std::move(l));
  }
}

void load_state(batch_state& st, const std::vector<pg::result>& r, const read_layout& layout) {
  const auto& acc = r[3];
  for (int i = 0; i < acc.rows(); ++i) {
    account_row a{std::string(acc.text(i, 0)),
                  std::string(acc.text(i, 1)),
                  acc.int64(i, 2),
                  acc.int64(i, 3),
                  account_status_from(acc.text(i, 4)).value_or(account_status::frozen),
                  acc.int64(i, 5),
                  false,
                  false,
                  acc.int64(i, 6)};
    st.accounts.emplace(batch_state::account_key(a.tenant, a.account_id), std::move(a));
  }
  const auto& ops = r[4];
  for (int i = 0; i < ops.rows(); ++i) {
    operation_row o;
    o.key = {std::string(ops.text(i, 0)), std::string(ops.text(i, 1)), std::string(ops.text(i, 2)),
             std::string(ops.text(i, 3))};
    o.request_hash = ops.text(i, 4);
    o.state = op_state_from(ops.text(i, 5)).value_or(op_state::rejected);
    o.amount = ops.int64(i, 6);
    if (!ops.is_null(i, 7)) o.reason = ops.text(i, 7);
    o.balance_after = ops.int64(i, 8);
    o.held_after = ops.int64(i, 9);
    o.version_after = ops.int64(i, 10);
    o.ledger_seq = ops.opt_int64(i, 11);
    o.refunded = ops.int64(i, 12);
    if (!ops.is_null(i, 13)) o.lots = lots_from_json(ops.text(i, 13));
    auto flat = o.key.flat();
    st.operations.emplace(std::move(flat), std::move(o));
  }
  const auto& seqs = r[5];
  for (int i = 0; i < seqs.rows(); ++i) st.free_seqs.push_back(seqs.int64(i, 0));
  std::sort(st.free_seqs.begin(), st.free_seqs.end());
  std::set<std::pair<std::string, std::int64_t>> seen;
  load_lots(st, r[6], seen);
  if (layout.named_lots >= 0) load_lots(st, r[static_cast<std::size_t>(layout.named_lots)], seen);
  if (layout.holds < 0) return;
  const auto& holds = r[static_cast<std::size_t>(layout.holds)];
  for (int i = 0; i < holds.rows(); ++i) {
    hold_row h{std::string(holds.text(i, 0)),
               std::string(holds.text(i, 1)),
               std::string(holds.text(i, 2)),
               holds.int64(i, 3),
               holds.int64(i, 4),
               hold_state_from(holds.text(i, 5)).value_or(hold_state::held),
               false,
               false};
    st.holds.emplace(batch_state::hold_key(h.tenant, h.account_id, h.hold_id), std::move(h));
  }
}

// Ledger sequence numbers a command may need: a capture writes its own
// entry and may expire the released rest of its hold.
std::size_t seqs_needed(std::span<const command> commands) {
  std::size_t n = 0;
  for (const auto& c : commands) n += c.kind == command_kind::capture ? 2 : 1;
  return n;
}

// The statements that lock and read everything the batch may touch.
std::vector<pg::statement> read_statements(std::span<const command> commands, read_layout& layout) {
  using key4 = std::tuple<std::string, std::string, std::string, std::string>;
  std::set<std::pair<std::string, std::string>> accounts;
  std::set<key4> ops;
  std::set<key4> naming;  // operations whose lots the batch needs whatever their state
  std::set<std::tuple<std::string, std::string, std::string>> holds;
  for (const auto& c : commands) {
    accounts.emplace(c.tenant, c.account_id);
    auto k = c.key();
    ops.emplace(k.tenant, k.account_id, k.biz_type, k.biz_id);
    if (c.kind == command_kind::refund) {
      auto t = c.target_key();
      ops.emplace(t.tenant, t.account_id, t.biz_type, t.biz_id);
      naming.emplace(t.tenant, t.account_id, t.biz_type, t.biz_id);
    }
    if (c.kind == command_kind::hold || c.kind == command_kind::capture || c.kind == command_kind::release)
      holds.emplace(c.tenant, c.account_id, c.biz_id);
    if (c.kind == command_kind::capture || c.kind == command_kind::release) {
      // The hold's record names its lots.
      ops.emplace(c.tenant, c.account_id, "hold", c.biz_id);
      naming.emplace(c.tenant, c.account_id, "hold", c.biz_id);
    }
  }
  auto columns_of = [](const std::set<key4>& keys) {
    std::vector<std::string> t, a, bt, bi;
    for (const auto& [kt, ka, kbt, kbi] : keys) t.push_back(kt), a.push_back(ka), bt.push_back(kbt), bi.push_back(kbi);
    return params_of({array_literal(t), array_literal(a), array_literal(bt), array_literal(bi)});
  };
  std::vector<std::string> a_t, a_a, h_t, h_a, h_h;
  for (const auto& [t, a] : accounts) a_t.push_back(t), a_a.push_back(a);
  for (const auto& [t, a, h] : holds) h_t.push_back(t), h_a.push_back(a), h_h.push_back(h);
  std::vector<pg::statement> st;
  st.push_back({sql_begin, {}});
  st.push_back({sql_fence_shared, {}});
  st.push_back({sql_read_epoch, {}});
  st.push_back({sql_lock_accounts, params_of({array_literal(a_t), array_literal(a_a)})});
  st.push_back({sql_lock_operations, columns_of(ops)});
  st.push_back({sql_reserve_seqs, {std::to_string(seqs_needed(commands))}});
  st.push_back({sql_lock_open_lots, params_of({array_literal(a_t), array_literal(a_a)})});
  // Only when needed: a statement costs even when it finds nothing.
  if (!naming.empty()) {
    layout.named_lots = static_cast<int>(st.size());
    st.push_back({sql_lock_named_lots, columns_of(naming)});
  }
  if (!holds.empty()) {
    layout.holds = static_cast<int>(st.size());
    st.push_back({sql_lock_holds, params_of({array_literal(h_t), array_literal(h_a), array_literal(h_h)})});
  }
  return st;
}

// An update of rows the batch locked, with the number it must change as
// its last parameter (expect_rows).
pg::statement update_of(std::string_view sql, std::vector<param> params, std::size_t rows) {
  params.emplace_back(std::to_string(rows));
  return {sql, std::move(params)};
}

std::vector<pg::statement> write_statements(const batch_state& st) {
  std::vector<pg::statement> out;
  {
    std::vector<std::string> t, a, s;
    std::vector<std::int64_t> b, h, v, l;
    std::vector<std::string> nt, na, ns;
    std::vector<std::int64_t> nb, nh, nv, nl;
    for (const auto& [_, acc] : st.accounts) {
      if (!acc.dirty) continue;
      auto [ct, ca, cs, cb, ch, cv, cl] =
          acc.is_new ? std::tie(nt, na, ns, nb, nh, nv, nl) : std::tie(t, a, s, b, h, v, l);
      ct.push_back(acc.tenant);
      ca.push_back(acc.account_id);
      cs.emplace_back(to_string(acc.status));
      cb.push_back(acc.balance);
      ch.push_back(acc.held);
      cv.push_back(acc.version);
      cl.push_back(acc.lot_count);
    }
    if (!nt.empty())
      out.push_back(
          {sql_insert_accounts, params_of({array_literal(nt), array_literal(na), array_literal(nb), array_literal(nh),
                                           array_literal(ns), array_literal(nv), array_literal(nl)})});
    if (!t.empty())
      out.push_back(update_of(sql_update_accounts,
                              params_of({array_literal(t), array_literal(a), array_literal(b), array_literal(h),
                                         array_literal(s), array_literal(v), array_literal(l)}),
                              t.size()));
  }
  {
    std::vector<std::string> t, a, bt, bi, rh, state;
    std::vector<param> reason, seq, lots;
    std::vector<std::int64_t> amount, bal, held, ver, refunded;
    std::vector<std::string> ut, ua, ubt, ubi;
    std::vector<std::int64_t> uref;
    for (const auto& [_, op] : st.operations) {
      if (!op.dirty) continue;
      if (!op.is_new) {
        ut.push_back(op.key.tenant), ua.push_back(op.key.account_id), ubt.push_back(op.key.biz_type),
            ubi.push_back(op.key.biz_id), uref.push_back(op.refunded);
        continue;
      }
      t.push_back(op.key.tenant), a.push_back(op.key.account_id), bt.push_back(op.key.biz_type),
          bi.push_back(op.key.biz_id), rh.push_back(op.request_hash), state.emplace_back(to_string(op.state));
      amount.push_back(op.amount), reason.push_back(opt_text(op.reason)), bal.push_back(op.balance_after),
          held.push_back(op.held_after), ver.push_back(op.version_after), seq.push_back(opt_int(op.ledger_seq)),
          refunded.push_back(op.refunded), lots.push_back(op.lots.empty() ? param{} : param{lots_json(op.lots)});
    }
    if (!t.empty())
      out.push_back({sql_insert_operations,
                     params_of({array_literal(t), array_literal(a), array_literal(bt), array_literal(bi),
                                array_literal(rh), array_literal(state), array_literal(amount), array_literal(reason),
                                array_literal(bal), array_literal(held), array_literal(ver), array_literal(seq),
                                array_literal(refunded), array_literal(lots)})});
    if (!ut.empty())
      out.push_back(update_of(sql_update_refunded,
                              params_of({array_literal(ut), array_literal(ua), array_literal(ubt), array_literal(ubi),
                                         array_literal(uref)}),
                              ut.size()));
  }
  {
    std::vector<std::string> t, a, id, state, ut, ua, uid, ustate;
    std::vector<std::int64_t> amount, captured, ucaptured;
    for (const auto& [_, h] : st.holds) {
      if (!h.dirty) continue;
      if (h.is_new) {
        t.push_back(h.tenant), a.push_back(h.account_id), id.push_back(h.hold_id), amount.push_back(h.amount),
            captured.push_back(h.captured), state.emplace_back(to_string(h.state));
      } else {
        ut.push_back(h.tenant), ua.push_back(h.account_id), uid.push_back(h.hold_id), ucaptured.push_back(h.captured),
            ustate.emplace_back(to_string(h.state));
      }
    }
    if (!t.empty())
      out.push_back(
          {sql_insert_holds, params_of({array_literal(t), array_literal(a), array_literal(id), array_literal(amount),
                                        array_literal(captured), array_literal(state)})});
    if (!ut.empty())
      out.push_back(update_of(sql_update_holds,
                              params_of({array_literal(ut), array_literal(ua), array_literal(uid),
                                         array_literal(ucaptured), array_literal(ustate)}),
                              ut.size()));
  }
  {
    std::vector<std::string> t, a, rv, origin, st_type, st_id, state, ut, ua, ustate;
    std::vector<std::int64_t> id, granted, remaining, held, expired, uid, uremaining, uheld, uexpired;
    std::vector<param> expires, grace;
    for (const auto& [_, account_lots] : st.lots) {
      for (const auto& l : account_lots) {
        if (!l.dirty) continue;
        if (l.is_new) {
          t.push_back(l.tenant), a.push_back(l.account_id), id.push_back(l.lot_id), granted.push_back(l.granted),
              remaining.push_back(l.remaining), held.push_back(l.held), expired.push_back(l.expired),
              expires.push_back(opt_int(l.expires_at)), rv.push_back(l.rule_version),
              origin.emplace_back(to_string(l.origin)), grace.push_back(opt_int(l.grace_ms)),
              st_type.push_back(l.source_type), st_id.push_back(l.source_id), state.emplace_back(to_string(l.state));
        } else {
          ut.push_back(l.tenant), ua.push_back(l.account_id), uid.push_back(l.lot_id),
              uremaining.push_back(l.remaining), uheld.push_back(l.held), uexpired.push_back(l.expired),
              ustate.emplace_back(to_string(l.state));
        }
      }
    }
    if (!t.empty())
      out.push_back({sql_insert_lots,
                     params_of({array_literal(t), array_literal(a), array_literal(id), array_literal(granted),
                                array_literal(remaining), array_literal(held), array_literal(expired),
                                array_literal(expires), array_literal(rv), array_literal(origin), array_literal(grace),
                                array_literal(st_type), array_literal(st_id), array_literal(state)})});
    if (!ut.empty())
      out.push_back(
          update_of(sql_update_lots,
                    params_of({array_literal(ut), array_literal(ua), array_literal(uid), array_literal(uremaining),
                               array_literal(uheld), array_literal(uexpired), array_literal(ustate)}),
                    ut.size()));
  }
  if (!st.ledger.empty()) {
    std::vector<std::int64_t> seq, delta, bal;
    std::vector<std::string> t, a, bt, bi;
    std::vector<param> rev;
    for (const auto& e : st.ledger) {
      seq.push_back(e.seq), t.push_back(e.key.tenant), a.push_back(e.key.account_id), bt.push_back(e.key.biz_type),
          bi.push_back(e.key.biz_id), delta.push_back(e.delta), bal.push_back(e.balance_after),
          rev.push_back(opt_int(e.reverses));
    }
    out.push_back({sql_insert_ledger,
                   params_of({array_literal(seq), array_literal(t), array_literal(a), array_literal(bt),
                              array_literal(bi), array_literal(delta), array_literal(bal), array_literal(rev)})});
  }
  if (!st.events.empty()) {
    std::vector<std::string> t, a, type, payload;
    std::vector<std::int64_t> v;
    for (const auto& e : st.events)
      t.push_back(e.tenant), a.push_back(e.account_id), v.push_back(e.version), type.push_back(e.event_type),
          payload.push_back(e.payload);
    out.push_back({sql_insert_events, params_of({array_literal(t), array_literal(a), array_literal(v),
                                                 array_literal(type), array_literal(payload)})});
  }
  return out;
}

}  // namespace

std::vector<std::string_view> batch_statements() {
  return {sql_lock_accounts,   sql_lock_operations, sql_lock_holds,        sql_lock_open_lots,
          sql_lock_named_lots, sql_reserve_seqs,    sql_insert_accounts,   sql_update_accounts,
          sql_insert_lots,     sql_update_lots,     sql_insert_operations, sql_update_refunded,
          sql_insert_holds,    sql_update_holds,    sql_insert_ledger,     sql_insert_events};
}

asio::awaitable<batch_outcome> async_run_batch(pg::connection& conn, const batch_context& ctx,
                                               std::span<const command> commands, std::chrono::milliseconds timeout) {
  batch_outcome out;
  std::vector<pg::result> results;
  read_layout layout;
  auto reads = read_statements(commands, layout);
  out.error = co_await conn.async_pipeline(reads, results, timeout);
  if (out.error) {
    co_await pg::async_rollback(conn, timeout);
    co_return out;
  }
  if (results[2].rows() != 1 || results[2].int64(0, 0) != ctx.writer_epoch) {
    co_await pg::async_rollback(conn, timeout);
    out.error = pg::error{make_error_code(pg::errc::fenced), "", "another writer took over this shard"};
    co_return out;
  }
  batch_state st;
  st.now_ms = ctx.now_ms;
  st.refund_grace_ms = ctx.refund_grace_ms;
  load_state(st, results, layout);
  out.replies.reserve(commands.size());
  for (const auto& c : commands) out.replies.push_back(st.decide(c));

  if (failpoint::hit("between_statements")) {
    co_await pg::async_rollback(conn, timeout);
    out.error = pg::error{make_error_code(pg::errc::query_failed), "", "failpoint between_statements"};
    co_return out;
  }
  auto writes = write_statements(st);
  if (!failpoint::armed()) {
    // Nothing has to stop between the writes and the commit: one round trip.
    writes.push_back({sql_commit, {}});
    out.error = co_await conn.async_pipeline(writes, results, timeout);
    if (out.error) {
      // A failed write aborts the pipeline before COMMIT runs; a lost
      // connection leaves the COMMIT's fate unknown.
      out.outcome_unknown = pg::is_outcome_unknown(out.error.code);
      if (!out.outcome_unknown) co_await pg::async_rollback(conn, timeout);
    }
    co_return out;
  }
  if (!writes.empty()) {
    out.error = co_await conn.async_pipeline(writes, results, timeout);
    if (out.error) {
      co_await pg::async_rollback(conn, timeout);
      co_return out;
    }
  }
  // The expiry job's batches have points of their own, so a chaos run can
  // stop exactly those.
  const bool expiring =
      std::any_of(commands.begin(), commands.end(), [](const command& c) { return c.kind == command_kind::expire; });
  bool injected = failpoint::hit("after_outbox_insert") | failpoint::hit("before_commit") |
                  (expiring && failpoint::hit("expiry_before_commit"));
  if (injected) {
    co_await pg::async_rollback(conn, timeout);
    out.error = pg::error{make_error_code(pg::errc::query_failed), "", "failpoint before_commit"};
    co_return out;
  }
  pg::result ignored;
  out.error = co_await conn.async_exec(sql_commit, ignored, timeout);
  if (out.error) {
    out.outcome_unknown = pg::is_outcome_unknown(out.error.code);
    if (!out.outcome_unknown) co_await pg::async_rollback(conn, timeout);
    co_return out;
  }
  failpoint::hit("after_commit_before_reply");
  if (expiring) failpoint::hit("expiry_after_commit_before_reply");
  co_return out;
}

}  // namespace tally::shard
