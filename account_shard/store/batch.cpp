#include "account_shard/store/batch.hpp"

#include <algorithm>
#include <compare>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "account_shard/store/fence.hpp"
#include "common/failpoint/failpoint.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;
using pg::param;
using pg::sql_begin;
using pg::sql_commit;

namespace {

// The keys a batch locks by, in the order it locks them (std::string's
// byte order is the tables' COLLATE "C").
struct account_ref {
  std::string tenant;
  std::string account_id;
  auto operator<=>(const account_ref&) const = default;
};
struct hold_ref {
  std::string tenant;
  std::string account_id;
  std::string hold_id;
  auto operator<=>(const hold_ref&) const = default;
};
// Per account, what the batch's debits and holds on it take from its lots
// (saturating: enough to read them all), and the rule version of the
// first non-expiring value it grants there (its lot on those terms may take
// the grant: decide.cpp, grant_lot).
struct lot_need {
  std::int64_t taken = 0;
  param lasting_rule;
};
using account_needs = std::map<account_ref, lot_need>;
constexpr auto account_need_columns =
    std::tuple{[](const account_needs::value_type& e) -> const std::string& { return e.first.tenant; },
               [](const account_needs::value_type& e) -> const std::string& { return e.first.account_id; }};
constexpr auto account_lot_need_columns =
    std::tuple{[](const account_needs::value_type& e) { return e.second.taken; },
               [](const account_needs::value_type& e) { return e.second.lasting_rule; }};
constexpr auto op_key_columns = std::tuple{&op_key::tenant, &op_key::account_id, &op_key::biz_type, &op_key::biz_id};
constexpr auto hold_ref_columns = std::tuple{&hold_ref::tenant, &hold_ref::account_id, &hold_ref::hold_id};

// A column of a row's op_key (operations, ledger entries).
constexpr auto of_key(auto member) {
  return [member](const auto& row) -> const std::string& { return std::invoke(member, row.key); };
}
constexpr auto keyed_columns = std::tuple{of_key(&op_key::tenant), of_key(&op_key::account_id),
                                          of_key(&op_key::biz_type), of_key(&op_key::biz_id)};
// An enum column as its stored name.
constexpr auto state_name = [](const auto& row) { return to_string(row.state); };
param opt_text(const std::string& s) { return s.empty() ? param{} : param{s}; }
param opt_int(const std::optional<std::int64_t>& v) { return v ? param{std::to_string(*v)} : param{}; }

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
//
// Next to each statement: the enum naming the columns it reads, or the
// tuple of the row's columns it takes as arrays, both in its order.
constexpr std::string_view sql_lock_accounts =
    "SELECT a.tenant, a.account_id, a.balance, a.held, a.status, a.version, a.lot_count "
    "FROM unnest($1::text[], $2::text[]) AS k(tenant, account_id) CROSS JOIN LATERAL "
    "(SELECT * FROM account a WHERE a.tenant = k.tenant AND a.account_id = k.account_id FOR UPDATE) a";
enum class account_column { tenant, account_id, balance, held, status, version, lot_count };
constexpr std::string_view sql_lock_operations =
    "SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, o.request_hash, o.state, o.amount, o.reason, "
    "o.balance_after, o.held_after, o.version_after, o.ledger_seq, o.refunded, o.lots::text "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(tenant, account_id, biz_type, biz_id) "
    "CROSS JOIN LATERAL (SELECT * FROM operation o WHERE o.tenant = k.tenant AND o.account_id = k.account_id "
    "AND o.biz_type = k.biz_type AND o.biz_id = k.biz_id FOR UPDATE) o";
enum class operation_column {
  tenant,
  account_id,
  biz_type,
  biz_id,
  request_hash,
  state,
  amount,
  reason,
  balance_after,
  held_after,
  version_after,
  ledger_seq,
  refunded,
  lots
};
constexpr std::string_view sql_lock_holds =
    "SELECT h.tenant, h.account_id, h.hold_id, h.amount, h.captured, h.state "
    "FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant, account_id, hold_id) CROSS JOIN LATERAL "
    "(SELECT * FROM hold h WHERE h.tenant = k.tenant AND h.account_id = k.account_id AND h.hold_id = k.hold_id "
    "FOR UPDATE) h";
enum class hold_column { tenant, account_id, hold_id, amount, captured, state };
// A lot's columns as lot_column names them (expires_at in unix ms).
#define TALLY_LOT_COLUMNS                                                                                    \
  "l.tenant, l.account_id, l.lot_id, l.granted, l.remaining, l.held, l.expired, "                            \
  "(extract(epoch FROM l.expires_at) * 1000)::bigint, l.rule_version, l.origin, l.grace_ms, l.source_type, " \
  "l.source_id, l.state "
enum class lot_column {
  tenant,
  account_id,
  lot_id,
  granted,
  remaining,
  held,
  expired,
  expires_at,
  rule_version,
  origin,
  grace_ms,
  source_type,
  source_id,
  state
};
// The open lots a batch's commands can take from, without reading every
// open lot of a busy account: all its expiring lots (consumed first), and
// its non-expiring ones in consumption order (lot id) only until their
// unheld value covers what the batch's debits and holds on it need ($3,
// none when 0); and the newest non-expiring lot of the rule version its
// non-expiring grants carry ($4), which may take them. Value the batch adds or frees itself comes later in the
// consumption order or is named (sql_lock_named_lots), so the first lots
// that cover the need are the ones the full set would give. A read without
// FOR UPDATE: the batch holds its accounts' rows (sql_lock_accounts, run
// before it), and every writer of an account's lots is a batch that locks
// the account first.
constexpr std::string_view sql_read_open_lots =
    "SELECT " TALLY_LOT_COLUMNS
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS k(tenant, account_id, needed, lasting_rule) "
    "CROSS JOIN LATERAL ("
    "(SELECT e.* FROM lot e WHERE e.tenant = k.tenant AND e.account_id = k.account_id AND e.state = 'open' "
    "AND e.expires_at IS NOT NULL) "
    "UNION ALL "
    "(WITH RECURSIVE walk AS ("
    "(SELECT n AS lot, n.remaining - n.held AS covered FROM lot n WHERE n.tenant = k.tenant "
    "AND n.account_id = k.account_id AND n.state = 'open' AND n.expires_at IS NULL AND k.needed > 0 "
    "ORDER BY n.lot_id LIMIT 1) "
    "UNION ALL "
    "(SELECT m.lot, w.covered + (m.lot).remaining - (m.lot).held FROM walk w CROSS JOIN LATERAL (SELECT n AS lot "
    "FROM lot n WHERE n.tenant = k.tenant AND n.account_id = k.account_id AND n.state = 'open' "
    "AND n.expires_at IS NULL AND n.lot_id > (w.lot).lot_id ORDER BY n.lot_id LIMIT 1) m WHERE w.covered < k.needed)) "
    "SELECT (w.lot).* FROM walk w) "
    "UNION ALL "
    "(SELECT t.* FROM lot t WHERE t.tenant = k.tenant AND t.account_id = k.account_id AND t.state = 'open' "
    "AND t.expires_at IS NULL AND t.rule_version = k.lasting_rule ORDER BY t.lot_id DESC LIMIT 1)) l";
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
// The one column of sql_reserve_seqs and of sql_read_epoch.
enum class value_column { value };

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
// Both statements' columns.
constexpr auto account_columns = std::tuple{&account_row::tenant,
                                            &account_row::account_id,
                                            &account_row::balance,
                                            &account_row::held,
                                            [](const account_row& a) { return to_string(a.status); },
                                            &account_row::version,
                                            &account_row::lot_count};
constexpr std::string_view sql_insert_lots =
    "INSERT INTO lot (tenant, account_id, lot_id, granted, remaining, held, expired, expires_at, rule_version, origin, "
    "grace_ms, source_type, source_id, state) "
    "SELECT t, a, id, g, r, h, x, 'epoch'::timestamptz + e * interval '1 millisecond', rv, o, gr, st, si, s "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
    "$8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[]) "
    "AS u(t, a, id, g, r, h, x, e, rv, o, gr, st, si, s)";
constexpr auto new_lot_columns = std::tuple{&lot_row::tenant,
                                            &lot_row::account_id,
                                            &lot_row::lot_id,
                                            &lot_row::granted,
                                            &lot_row::remaining,
                                            &lot_row::held,
                                            &lot_row::expired,
                                            [](const lot_row& l) { return opt_int(l.expires_at); },
                                            &lot_row::rule_version,
                                            [](const lot_row& l) { return to_string(l.origin); },
                                            [](const lot_row& l) { return opt_int(l.grace_ms); },
                                            &lot_row::source_type,
                                            &lot_row::source_id,
                                            state_name};
constexpr std::string_view sql_update_lots =
    "WITH changed AS (UPDATE lot l SET granted = u.granted, remaining = u.remaining, held = u.held, "
    "expired = u.expired, state = u.state, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
    "$8::text[]) AS u(tenant, account_id, lot_id, granted, remaining, held, expired, state) "
    "WHERE l.tenant = u.tenant AND l.account_id = u.account_id AND l.lot_id = u.lot_id RETURNING 1) "
    "SELECT expect_rows(count(*), $9) FROM changed";
constexpr auto changed_lot_columns =
    std::tuple{&lot_row::tenant,    &lot_row::account_id, &lot_row::lot_id,  &lot_row::granted,
               &lot_row::remaining, &lot_row::held,       &lot_row::expired, state_name};
constexpr std::string_view sql_insert_operations =
    "INSERT INTO operation (tenant, account_id, biz_type, biz_id, request_hash, state, amount, reason, "
    "balance_after, held_after, version_after, ledger_seq, refunded, lots) "
    "SELECT t, a, bt, bi, rh, s, am, re, ba, ha, va, ls, rf, l::jsonb "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], "
    "$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[]) "
    "AS u(t, a, bt, bi, rh, s, am, re, ba, ha, va, ls, rf, l)";
constexpr auto new_operation_columns = std::tuple_cat(
    keyed_columns,
    std::tuple{&operation_row::request_hash, state_name, &operation_row::amount,
               [](const operation_row& o) { return opt_text(o.reason); }, &operation_row::balance_after,
               &operation_row::held_after, &operation_row::version_after,
               [](const operation_row& o) { return opt_int(o.ledger_seq); }, &operation_row::refunded,
               [](const operation_row& o) { return o.lots.empty() ? param{} : param{lots_json(o.lots)}; }});
constexpr std::string_view sql_update_refunded =
    "WITH changed AS (UPDATE operation o SET refunded = u.refunded "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) "
    "AS u(tenant, account_id, biz_type, biz_id, refunded) "
    "WHERE o.tenant = u.tenant AND o.account_id = u.account_id AND o.biz_type = u.biz_type AND o.biz_id = u.biz_id "
    "RETURNING 1) SELECT expect_rows(count(*), $6) FROM changed";
constexpr auto refunded_columns = std::tuple_cat(keyed_columns, std::tuple{&operation_row::refunded});
constexpr std::string_view sql_insert_holds =
    "INSERT INTO hold (tenant, account_id, hold_id, amount, captured, state) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[])";
constexpr auto new_hold_columns = std::tuple{&hold_row::tenant, &hold_row::account_id, &hold_row::hold_id,
                                             &hold_row::amount, &hold_row::captured,   state_name};
constexpr std::string_view sql_update_holds =
    "WITH changed AS (UPDATE hold h SET captured = u.captured, state = u.state, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) "
    "AS u(tenant, account_id, hold_id, captured, state) "
    "WHERE h.tenant = u.tenant AND h.account_id = u.account_id AND h.hold_id = u.hold_id "
    "RETURNING 1) SELECT expect_rows(count(*), $6) FROM changed";
constexpr auto changed_hold_columns =
    std::tuple{&hold_row::tenant, &hold_row::account_id, &hold_row::hold_id, &hold_row::captured, state_name};
constexpr std::string_view sql_insert_ledger =
    "INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses) "
    "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], "
    "$8::bigint[])";
constexpr auto ledger_columns = std::tuple_cat(std::tuple{&ledger_row::seq}, keyed_columns,
                                               std::tuple{&ledger_row::delta, &ledger_row::balance_after,
                                                          [](const ledger_row& e) { return opt_int(e.reverses); }});
constexpr std::string_view sql_insert_events =
    "INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload) "
    "SELECT t, a, v, e, p::json FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) "
    "AS u(t, a, v, e, p)";
constexpr auto event_columns = std::tuple{&event_row::tenant, &event_row::account_id, &event_row::version,
                                          &event_row::event_type, &event_row::payload};

account_row account_from(const pg::row<account_column>& r) {
  using c = account_column;
  account_row a;
  a.tenant = r.text(c::tenant);
  a.account_id = r.text(c::account_id);
  a.balance = r.int64(c::balance);
  a.held = r.int64(c::held);
  a.status = account_status_from(r.text(c::status)).value_or(account_status::frozen);
  a.version = r.int64(c::version);
  a.lot_count = r.int64(c::lot_count);
  return a;
}

operation_row operation_from(const pg::row<operation_column>& r) {
  using c = operation_column;
  operation_row o;
  o.key = {std::string(r.text(c::tenant)), std::string(r.text(c::account_id)), std::string(r.text(c::biz_type)),
           std::string(r.text(c::biz_id))};
  o.request_hash = r.text(c::request_hash);
  o.state = op_state_from(r.text(c::state)).value_or(op_state::rejected);
  o.amount = r.int64(c::amount);
  if (!r.is_null(c::reason)) o.reason = r.text(c::reason);
  o.balance_after = r.int64(c::balance_after);
  o.held_after = r.int64(c::held_after);
  o.version_after = r.int64(c::version_after);
  o.ledger_seq = r.opt_int64(c::ledger_seq);
  o.refunded = r.int64(c::refunded);
  if (!r.is_null(c::lots)) o.lots = lots_from_json(r.text(c::lots));
  return o;
}

hold_row hold_from(const pg::row<hold_column>& r) {
  using c = hold_column;
  hold_row h;
  h.tenant = r.text(c::tenant);
  h.account_id = r.text(c::account_id);
  h.hold_id = r.text(c::hold_id);
  h.amount = r.int64(c::amount);
  h.captured = r.int64(c::captured);
  h.state = hold_state_from(r.text(c::state)).value_or(hold_state::held);
  return h;
}

lot_row lot_from(const pg::row<lot_column>& r) {
  using c = lot_column;
  lot_row l;
  l.tenant = r.text(c::tenant);
  l.account_id = r.text(c::account_id);
  l.lot_id = r.int64(c::lot_id);
  l.granted = r.int64(c::granted);
  l.remaining = r.int64(c::remaining);
  l.held = r.int64(c::held);
  l.expired = r.int64(c::expired);
  l.expires_at = r.opt_int64(c::expires_at);
  l.rule_version = r.text(c::rule_version);
  l.origin = lot_origin_from(r.text(c::origin)).value_or(lot_origin::grant);
  l.grace_ms = r.opt_int64(c::grace_ms);
  l.source_type = r.text(c::source_type);
  l.source_id = r.text(c::source_id);
  l.state = lot_state_from(r.text(c::state)).value_or(lot_state::expired);
  return l;
}

// The batch's reads in pipeline order, and where each one's result is.
struct read_plan {
  std::vector<pg::statement> statements;
  std::size_t epoch = 0;
  std::size_t accounts = 0;
  std::size_t operations = 0;
  std::size_t seqs = 0;
  std::size_t open_lots = 0;
  std::optional<std::size_t> named_lots;  // only when needed: a statement costs even when it finds nothing
  std::optional<std::size_t> holds;

  std::size_t add(std::string_view sql, std::vector<param> params) {
    statements.push_back({sql, std::move(params)});
    return statements.size() - 1;
  }
};

void load_lots(batch_state& st, const pg::result& r, std::set<std::pair<std::string, std::int64_t>>& seen) {
  for (auto row : pg::rows_of<lot_column>(r)) {
    auto key = batch_state::account_key(row.text(lot_column::tenant), row.text(lot_column::account_id));
    // A lot both open and named by an operation comes twice.
    if (!seen.emplace(key, row.int64(lot_column::lot_id)).second) continue;
    st.lots[key].push_back(lot_from(row));
  }
}

void load_state(batch_state& st, const std::vector<pg::result>& r, const read_plan& plan) {
  for (auto row : pg::rows_of<account_column>(r[plan.accounts])) {
    auto a = account_from(row);
    st.accounts.emplace(batch_state::account_key(a.tenant, a.account_id), std::move(a));
  }
  for (auto row : pg::rows_of<operation_column>(r[plan.operations])) {
    auto o = operation_from(row);
    auto flat = o.key.flat();
    st.operations.emplace(std::move(flat), std::move(o));
  }
  for (auto row : pg::rows_of<value_column>(r[plan.seqs])) st.free_seqs.push_back(row.int64(value_column::value));
  std::sort(st.free_seqs.begin(), st.free_seqs.end());
  std::set<std::pair<std::string, std::int64_t>> seen;
  load_lots(st, r[plan.open_lots], seen);
  if (plan.named_lots) load_lots(st, r[*plan.named_lots], seen);
  if (!plan.holds) return;
  for (auto row : pg::rows_of<hold_column>(r[*plan.holds])) {
    auto h = hold_from(row);
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

// The rule version of a credit's first non-expiring part, if it has one.
param lasting_rule_of(const command& c) {
  if (c.lots.empty()) return c.expires_at ? param{} : param{c.rule_version};
  for (const auto& part : c.lots)
    if (!part.expires_at) return part.rule_version;
  return {};
}

// The statements that lock and read everything the batch may touch.
read_plan read_statements(std::span<const command> commands, bool require_synchronous_standby) {
  account_needs accounts;
  std::set<op_key> ops;
  std::set<op_key> naming;  // operations whose lots the batch needs whatever their state
  std::set<hold_ref> holds;
  for (const auto& c : commands) {
    auto& need = accounts[{c.tenant, c.account_id}];
    constexpr auto most = std::numeric_limits<std::int64_t>::max();
    if (c.kind == command_kind::debit || c.kind == command_kind::hold)
      need.taken = c.amount > most - need.taken ? most : need.taken + c.amount;
    if (c.kind == command_kind::credit && !need.lasting_rule) need.lasting_rule = lasting_rule_of(c);
    ops.insert(c.key());
    if (c.kind == command_kind::refund) {
      ops.insert(c.target_key());
      naming.insert(c.target_key());
    }
    if (c.kind == command_kind::hold || c.kind == command_kind::capture || c.kind == command_kind::release)
      holds.insert({c.tenant, c.account_id, c.biz_id});
    if (c.kind == command_kind::capture || c.kind == command_kind::release) {
      // The hold's record names its lots.
      op_key hold_record{c.tenant, c.account_id, "hold", c.biz_id};
      ops.insert(hold_record);
      naming.insert(std::move(hold_record));
    }
  }
  const auto account_arrays = pg::arrays_of(accounts, account_need_columns);
  auto lot_arrays = account_arrays;
  for (auto& a : pg::arrays_of(accounts, account_lot_need_columns)) lot_arrays.push_back(std::move(a));
  read_plan plan;
  plan.add(sql_begin, {});
  if (require_synchronous_standby) plan.add(pg::sql_require_synchronous_standby, {});
  plan.add(sql_fence_shared, {});
  plan.epoch = plan.add(sql_read_epoch, {});
  plan.accounts = plan.add(sql_lock_accounts, account_arrays);
  plan.operations = plan.add(sql_lock_operations, pg::arrays_of(ops, op_key_columns));
  plan.seqs = plan.add(sql_reserve_seqs, {std::to_string(seqs_needed(commands))});
  plan.open_lots = plan.add(sql_read_open_lots, std::move(lot_arrays));
  if (!naming.empty()) plan.named_lots = plan.add(sql_lock_named_lots, pg::arrays_of(naming, op_key_columns));
  if (!holds.empty()) plan.holds = plan.add(sql_lock_holds, pg::arrays_of(holds, hold_ref_columns));
  return plan;
}

// The rows a batch writes, by statement: the new ones are inserted, the
// changed ones updated.
struct batch_writes {
  std::vector<const account_row*> new_accounts, changed_accounts;
  std::vector<const operation_row*> new_operations, refunded_operations;
  std::vector<const hold_row*> new_holds, changed_holds;
  std::vector<const lot_row*> new_lots, changed_lots;
};

template <class Row>
void add_if_dirty(const Row& row, std::vector<const Row*>& inserted, std::vector<const Row*>& updated) {
  if (row.dirty) (row.is_new ? inserted : updated).push_back(&row);
}

batch_writes writes_of(const batch_state& st) {
  batch_writes w;
  for (const auto& [_, a] : st.accounts) add_if_dirty(a, w.new_accounts, w.changed_accounts);
  // An operation written before changes only by being refunded.
  for (const auto& [_, o] : st.operations) add_if_dirty(o, w.new_operations, w.refunded_operations);
  for (const auto& [_, h] : st.holds) add_if_dirty(h, w.new_holds, w.changed_holds);
  for (const auto& [_, account_lots] : st.lots)
    for (const auto& l : account_lots) add_if_dirty(l, w.new_lots, w.changed_lots);
  return w;
}

void insert(std::vector<pg::statement>& out, std::string_view sql, const auto& rows, const auto& columns) {
  if (!rows.empty()) out.push_back({sql, pg::arrays_of(rows, columns)});
}

// An update of rows the batch locked, with the number it must change as
// its last parameter (expect_rows).
void update(std::vector<pg::statement>& out, std::string_view sql, const auto& rows, const auto& columns) {
  if (rows.empty()) return;
  auto params = pg::arrays_of(rows, columns);
  params.emplace_back(std::to_string(rows.size()));
  out.push_back({sql, std::move(params)});
}

std::vector<pg::statement> write_statements(const batch_state& st) {
  const auto w = writes_of(st);
  std::vector<pg::statement> out;
  insert(out, sql_insert_accounts, w.new_accounts, account_columns);
  update(out, sql_update_accounts, w.changed_accounts, account_columns);
  insert(out, sql_insert_operations, w.new_operations, new_operation_columns);
  update(out, sql_update_refunded, w.refunded_operations, refunded_columns);
  insert(out, sql_insert_holds, w.new_holds, new_hold_columns);
  update(out, sql_update_holds, w.changed_holds, changed_hold_columns);
  insert(out, sql_insert_lots, w.new_lots, new_lot_columns);
  update(out, sql_update_lots, w.changed_lots, changed_lot_columns);
  insert(out, sql_insert_ledger, st.ledger, ledger_columns);
  insert(out, sql_insert_events, st.events, event_columns);
  return out;
}

}  // namespace

std::vector<std::string_view> batch_statements() {
  return {sql_lock_accounts,   sql_lock_operations, sql_lock_holds,        sql_read_open_lots,
          sql_lock_named_lots, sql_reserve_seqs,    sql_insert_accounts,   sql_update_accounts,
          sql_insert_lots,     sql_update_lots,     sql_insert_operations, sql_update_refunded,
          sql_insert_holds,    sql_update_holds,    sql_insert_ledger,     sql_insert_events};
}

asio::awaitable<batch_outcome> async_run_batch(pg::connection& conn, const batch_context& ctx,
                                               std::span<const command> commands, std::chrono::milliseconds timeout) {
  batch_outcome out;
  std::vector<pg::result> results;
  const auto reads = read_statements(commands, ctx.require_synchronous_standby);
  out.error = co_await conn.async_pipeline(reads.statements, results, timeout);
  if (out.error) {
    co_await pg::async_rollback(conn, timeout);
    co_return out;
  }
  const auto& epoch = results[reads.epoch];
  if (epoch.rows() != 1 || pg::row<value_column>(epoch, 0).int64(value_column::value) != ctx.writer_epoch) {
    co_await pg::async_rollback(conn, timeout);
    out.error = pg::error{make_error_code(pg::errc::fenced), "", "another writer took over this shard"};
    co_return out;
  }
  batch_state st;
  st.now_ms = ctx.now_ms;
  st.refund_grace_ms = ctx.refund_grace_ms;
  load_state(st, results, reads);
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
