#include "account_shard/store/batch_writes.hpp"

#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/pg/rows.hpp"

namespace tally::shard {

using pg::param;

namespace {

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

// Each write below numbers its parameters from $1 (sql_write_batch
// renumbers them), next to the tuple of the row's columns it takes as
// arrays, in its order. An update joins its arrays to the table by key; the
// writers' sessions (shard_writer_session_sql) make that a nested loop
// probing the primary key, even on empty tables.
constexpr std::string_view dml_insert_accounts =
    "INSERT INTO account (tenant, account_id, balance, held, status, version, lot_count) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], "
    "$7::bigint[])";
constexpr std::string_view dml_update_accounts =
    "UPDATE account a SET balance = u.balance, held = u.held, status = u.status, version = u.version, "
    "lot_count = u.lot_count, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[]) "
    "AS u(tenant, account_id, balance, held, status, version, lot_count) "
    "WHERE a.tenant = u.tenant AND a.account_id = u.account_id RETURNING 1";
// Both statements' columns.
constexpr auto account_columns = std::tuple{&account_row::tenant,
                                            &account_row::account_id,
                                            &account_row::balance,
                                            &account_row::held,
                                            [](const account_row& a) { return to_string(a.status); },
                                            &account_row::version,
                                            &account_row::lot_count};
constexpr std::string_view dml_insert_lots =
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
constexpr std::string_view dml_update_lots =
    "UPDATE lot l SET remaining = u.remaining, held = u.held, expired = u.expired, state = u.state, "
    "updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[]) "
    "AS u(tenant, account_id, lot_id, remaining, held, expired, state) "
    "WHERE l.tenant = u.tenant AND l.account_id = u.account_id AND l.lot_id = u.lot_id RETURNING 1";
constexpr auto changed_lot_columns =
    std::tuple{&lot_row::tenant, &lot_row::account_id, &lot_row::lot_id, &lot_row::remaining,
               &lot_row::held,   &lot_row::expired,    state_name};
constexpr std::string_view dml_insert_operations =
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
constexpr std::string_view dml_update_refunded =
    "UPDATE operation o SET refunded = u.refunded "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) "
    "AS u(tenant, account_id, biz_type, biz_id, refunded) "
    "WHERE o.tenant = u.tenant AND o.account_id = u.account_id AND o.biz_type = u.biz_type AND o.biz_id = u.biz_id "
    "RETURNING 1";
constexpr auto refunded_columns = std::tuple_cat(keyed_columns, std::tuple{&operation_row::refunded});
constexpr std::string_view dml_insert_holds =
    "INSERT INTO hold (tenant, account_id, hold_id, amount, captured, state) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[])";
constexpr auto new_hold_columns = std::tuple{&hold_row::tenant, &hold_row::account_id, &hold_row::hold_id,
                                             &hold_row::amount, &hold_row::captured,   state_name};
constexpr std::string_view dml_update_holds =
    "UPDATE hold h SET captured = u.captured, state = u.state, updated_at = now() "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) "
    "AS u(tenant, account_id, hold_id, captured, state) "
    "WHERE h.tenant = u.tenant AND h.account_id = u.account_id AND h.hold_id = u.hold_id RETURNING 1";
constexpr auto changed_hold_columns =
    std::tuple{&hold_row::tenant, &hold_row::account_id, &hold_row::hold_id, &hold_row::captured, state_name};
constexpr std::string_view dml_insert_ledger =
    "INSERT INTO ledger_entry (seq, tenant, account_id, biz_type, biz_id, delta, balance_after, reverses) "
    "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], "
    "$8::bigint[])";
constexpr auto ledger_columns = std::tuple_cat(std::tuple{&ledger_row::seq}, keyed_columns,
                                               std::tuple{&ledger_row::delta, &ledger_row::balance_after,
                                                          [](const ledger_row& e) { return opt_int(e.reverses); }});
constexpr std::string_view dml_insert_events =
    "INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload) "
    "SELECT t, a, v, e, p::jsonb FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) "
    "AS u(t, a, v, e, p)";
constexpr auto event_columns = std::tuple{&event_row::tenant, &event_row::account_id, &event_row::version,
                                          &event_row::event_type, &event_row::payload};

template <class Columns>
constexpr std::size_t width(const Columns&) {
  return std::tuple_size_v<Columns>;
}

// One write of the statement; an update's changed rows are counted.
struct write_part {
  std::string_view name;
  std::string_view dml;
  std::size_t params;
  bool counted;
};
// In the order write_statement passes their arrays.
constexpr std::array write_parts{
    write_part{"new_accounts", dml_insert_accounts, width(account_columns), false},
    write_part{"changed_accounts", dml_update_accounts, width(account_columns), true},
    write_part{"new_operations", dml_insert_operations, width(new_operation_columns), false},
    write_part{"refunded_operations", dml_update_refunded, width(refunded_columns), true},
    write_part{"new_holds", dml_insert_holds, width(new_hold_columns), false},
    write_part{"changed_holds", dml_update_holds, width(changed_hold_columns), true},
    write_part{"new_lots", dml_insert_lots, width(new_lot_columns), false},
    write_part{"changed_lots", dml_update_lots, width(changed_lot_columns), true},
    write_part{"new_entries", dml_insert_ledger, width(ledger_columns), false},
    write_part{"new_events", dml_insert_events, width(event_columns), false},
};

// `sql` with each $n turned into $(n + offset).
std::string renumbered(std::string_view sql, std::size_t offset) {
  std::string out;
  for (std::size_t i = 0; i < sql.size();) {
    out += sql[i++];
    if (out.back() != '$') continue;
    std::size_t n = 0;
    for (; i < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i])); ++i) n = n * 10 + (sql[i] - '0');
    out += std::to_string(n + offset);
  }
  return out;
}

std::string compose_write_batch() {
  std::string with, checks;
  std::size_t used = 0;
  for (const auto& part : write_parts) {
    with += with.empty() ? "WITH " : ", ";
    with += std::string(part.name) + " AS (" + renumbered(part.dml, used) + ")";
    used += part.params;
  }
  // The counts come after every array.
  for (const auto& part : write_parts) {
    if (!part.counted) continue;
    checks += checks.empty() ? " SELECT " : ", ";
    checks += "expect_rows((SELECT count(*) FROM " + std::string(part.name) + "), $" + std::to_string(++used) + ")";
  }
  return with + checks;
}

// The rows a batch writes, by part: the new ones are inserted, the changed
// ones updated.
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

void add_arrays(std::vector<param>& params, const auto& rows, const auto& columns) {
  for (auto& a : pg::arrays_of(rows, columns)) params.push_back(std::move(a));
}

}  // namespace

std::string_view sql_write_batch() {
  static const std::string sql = compose_write_batch();
  return sql;
}

std::optional<pg::statement> write_statement(const batch_state& st) {
  const auto w = writes_of(st);
  if (w.new_accounts.empty() && w.changed_accounts.empty() && w.new_operations.empty() &&
      w.refunded_operations.empty() && w.new_holds.empty() && w.changed_holds.empty() && w.new_lots.empty() &&
      w.changed_lots.empty() && st.ledger.empty() && st.events.empty())
    return std::nullopt;
  std::vector<param> params;
  // write_parts' order.
  add_arrays(params, w.new_accounts, account_columns);
  add_arrays(params, w.changed_accounts, account_columns);
  add_arrays(params, w.new_operations, new_operation_columns);
  add_arrays(params, w.refunded_operations, refunded_columns);
  add_arrays(params, w.new_holds, new_hold_columns);
  add_arrays(params, w.changed_holds, changed_hold_columns);
  add_arrays(params, w.new_lots, new_lot_columns);
  add_arrays(params, w.changed_lots, changed_lot_columns);
  add_arrays(params, st.ledger, ledger_columns);
  add_arrays(params, st.events, event_columns);
  for (auto changed :
       {w.changed_accounts.size(), w.refunded_operations.size(), w.changed_holds.size(), w.changed_lots.size()})
    params.emplace_back(std::to_string(changed));
  return pg::statement{sql_write_batch(), std::move(params)};
}

}  // namespace tally::shard
