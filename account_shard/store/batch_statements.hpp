#pragma once
// What a batch (batch.cpp) sends: the keys it locks by, and each statement
// with its layout — the enum naming the columns it reads, or the tuple of a
// row's columns it takes as arrays, both in the statement's order.
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "account_shard/ledger/decide.hpp"
#include "account_shard/store/operation_columns.hpp"
#include "common/pg/connection.hpp"

namespace tally::shard::batch_sql {

using pg::param;

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
inline param opt_int(const std::optional<std::int64_t>& v) { return v ? param{std::to_string(*v)} : param{}; }

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
    "SELECT " TALLY_OPERATION_COLUMNS
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(tenant, account_id, biz_type, biz_id) "
    "CROSS JOIN LATERAL (SELECT * FROM operation o WHERE o.tenant = k.tenant AND o.account_id = k.account_id "
    "AND o.biz_type = k.biz_type AND o.biz_id = k.biz_id FOR UPDATE) o";
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
// The one column of sql_reserve_seqs.
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
               [](const operation_row& o) { return o.reason ? param{std::string(to_string(*o.reason))} : param{}; },
               &operation_row::balance_after, &operation_row::held_after, &operation_row::version_after,
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

}  // namespace tally::shard::batch_sql
