#include "account_shard/store/account_check.hpp"

#include <cstdlib>
#include <span>
#include <tuple>

#include "account_shard/store/account_check_statements.hpp"
#include "common/pg/rows.hpp"

namespace tally::shard {

namespace asio = boost::asio;
using namespace check_sql;

namespace {

constexpr std::string_view sql_account_entries_upto =
    "SELECT seq, biz_type, biz_id, delta, reverses FROM ledger_entry "
    "WHERE tenant = $1 AND account_id = $2 AND seq <= $3 ORDER BY seq";
enum class entry_col { seq, biz_type, biz_id, delta, reverses };  // in select order
// The checkpoints that changed (next_checkpoint decides them). A clean one
// never replaces a later one that a run with a newer snapshot wrote
// meanwhile (two operators' runs at once).
constexpr std::string_view sql_write_checkpoints =
    "INSERT INTO account_checkpoint AS c (tenant, account_id, seq, balance, clean) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[]) "
    "ON CONFLICT (tenant, account_id) DO UPDATE SET seq = EXCLUDED.seq, balance = EXCLUDED.balance, "
    "clean = EXCLUDED.clean, checked_at = now() WHERE NOT EXCLUDED.clean OR EXCLUDED.seq >= c.seq";

template <class T>
std::string literal(const std::vector<T>& items) {
  return pg::array_literal(std::span<const T>(items));
}

// A row's (tenant, account id).
template <class Column>
account_key account_of(const pg::row<Column>& r) {
  return {std::string(r.text(Column::tenant)), std::string(r.text(Column::account_id))};
}

using lot_key = std::tuple<std::string, std::string, std::int64_t>;  // (tenant, account id, lot id)

// Each row by its (tenant, account id).
template <class Column>
std::map<account_key, pg::row<Column>> keyed_by_account(const pg::result& r) {
  std::map<account_key, pg::row<Column>> out;
  for (auto row : pg::rows_of<Column>(r)) out.emplace(account_of(row), row);
  return out;
}

// Each row by its (tenant, account id, lot id).
template <class Column>
std::map<lot_key, pg::row<Column>> keyed_by_lot(const pg::result& r) {
  std::map<lot_key, pg::row<Column>> out;
  for (auto row : pg::rows_of<Column>(r))
    out.emplace(lot_key{row.text(Column::tenant), row.text(Column::account_id), row.int64(Column::lot_id)}, row);
  return out;
}

// The lot_mismatch findings per account: each lot beside what the
// operations naming it add up to (when read) and the open holds' parts in
// it, each operation whose parts differ from its entry, each account whose
// lots do not add up to its balance and held.
std::map<account_key, std::vector<finding>> find_lot_findings(const run_reads& in) {
  std::map<account_key, std::vector<finding>> out;
  const auto by_parts = keyed_by_lot<lot_part_col>(in.lot_parts);
  const auto by_held = keyed_by_lot<held_part_col>(in.held_parts);
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> expire_count;
  for (auto row : pg::rows_of<expire_entry_col>(in.expire_entries))
    expire_count.emplace(
        std::tuple{std::string(row.text(expire_entry_col::tenant)), std::string(row.text(expire_entry_col::account_id)),
                   std::string(row.text(expire_entry_col::biz_id))},
        row.int64(expire_entry_col::entries));
  std::map<account_key, std::pair<std::int64_t, std::int64_t>> lot_sums;  // Σ remaining, Σ held
  for (auto lot : pg::rows_of<lot_col>(in.lots)) {
    const lot_key key{lot.text(lot_col::tenant), lot.text(lot_col::account_id), lot.int64(lot_col::lot_id)};
    const auto p = by_parts.find(key);
    const auto h = by_held.find(key);
    const auto x = expire_count.find({std::get<0>(key), std::get<1>(key), std::to_string(std::get<2>(key))});
    lot_view v{std::get<2>(key),
               lot.int64(lot_col::remaining),
               lot.int64(lot_col::held),
               lot.int64(lot_col::expired),
               lot.boolean(lot_col::is_expired),
               p == by_parts.end() ? 0 : p->second.int64(lot_part_col::ops_remaining),
               h == by_held.end() ? 0 : h->second.int64(held_part_col::held),
               x == expire_count.end() ? 0 : x->second,
               p == by_parts.end() ? 0 : p->second.int64(lot_part_col::expired_by_ops),
               in.history_read};
    auto& sums = lot_sums[account_of(lot)];
    sums.first += v.remaining;
    sums.second += v.held;
    std::vector<finding> found;
    find_lot_mismatches(v, found);
    if (found.empty()) continue;
    auto& list = out[account_of(lot)];
    list.insert(list.end(), found.begin(), found.end());
  }
  for (auto a : pg::rows_of<allocation_col>(in.allocations))
    out[account_of(a)].push_back(
        {"lot_mismatch", a.int64(allocation_col::total) - std::abs(a.int64(allocation_col::delta)),
         std::string(a.text(allocation_col::biz_type)), std::string(a.text(allocation_col::biz_id)), std::nullopt});
  for (auto account : pg::rows_of<account_col>(in.accounts)) {
    const auto key = account_of(account);
    const auto sums = lot_sums.find(key);
    const auto [remaining, held] = sums == lot_sums.end() ? std::pair<std::int64_t, std::int64_t>{} : sums->second;
    const std::int64_t balance = account.int64(account_col::balance), account_held = account.int64(account_col::held);
    if (balance != remaining) out[key].push_back({"lot_mismatch", balance - remaining, "", "", std::nullopt});
    if (account_held != held) out[key].push_back({"lot_mismatch", account_held - held, "", "", std::nullopt});
  }
  return out;
}

// Each account's checkpoint before the check.
std::map<account_key, checkpoint> checkpoints_before(const run_reads& in) {
  std::map<account_key, checkpoint> out;
  if (!in.checkpoints_in_ledger) {
    using c = checkpoint_col;
    for (auto row : pg::rows_of<c>(in.checkpoints))
      out.emplace(account_of(row), checkpoint{row.int64(c::seq), row.int64(c::balance), row.boolean(c::clean)});
    return out;
  }
  using l = ledger_col;
  for (auto row : pg::rows_of<l>(in.ledger))
    if (!row.is_null(l::checkpoint_seq))
      out.emplace(account_of(row), checkpoint{row.int64(l::checkpoint_seq), row.int64(l::checkpoint_balance),
                                              row.boolean(l::checkpoint_clean)});
  return out;
}

}  // namespace

std::vector<pg::statement> check_statements(const account_set& set, std::int64_t w, check_kind kind,
                                            const std::optional<std::string>& tenant) {
  const auto t = literal(set.tenants), a = literal(set.accounts), at = std::to_string(w);
  if (kind == check_kind::since_checkpoint)
    return {{sql_accounts, {t, a}},      {sql_ledger, {t, a, at, "true"}}, scope_open_holds(tenant),
            {sql_lots, {t, a, "false"}}, scope_held_parts(tenant),         {sql_allocations, {t, a, "true"}}};
  return {{sql_accounts, {t, a}},       {sql_ledger, {t, a, at, "false"}}, {sql_open_holds, {t, a}},
          {sql_lots, {t, a, "true"}},   {sql_lot_parts, {t, a}},           {sql_held_parts, {t, a}},
          {sql_expire_entries, {t, a}}, {sql_allocations, {t, a, "false"}}};
}

pg::statement scope_open_holds(const std::optional<std::string>& tenant) { return {sql_scope_open_holds, {tenant}}; }
pg::statement scope_held_parts(const std::optional<std::string>& tenant) { return {sql_scope_held_parts, {tenant}}; }

run_reads reads_of(std::vector<pg::result> r, check_kind kind) {
  run_reads in;
  in.accounts = std::move(r[0]);
  in.ledger = std::move(r[1]);
  in.open_holds = std::move(r[2]);
  in.lots = std::move(r[3]);
  if (kind == check_kind::since_checkpoint) {
    in.history_read = false;
    in.held_parts = std::move(r[4]);
    in.allocations = std::move(r[5]);
  } else {
    in.lot_parts = std::move(r[4]);
    in.held_parts = std::move(r[5]);
    in.expire_entries = std::move(r[6]);
    in.allocations = std::move(r[7]);
  }
  return in;
}

void checkpoint_writes::add(const account_key& key, const checkpoint& c) {
  tenants.push_back(key.first);
  accounts.push_back(key.second);
  seqs.push_back(c.seq);
  balances.push_back(c.balance);
  clean.emplace_back(c.clean ? "t" : "f");
}

pg::statement checkpoint_writes::statement() const {
  return {sql_write_checkpoints,
          {literal(tenants), literal(accounts), literal(seqs), literal(balances), literal(clean)}};
}

asio::awaitable<pg::error> check_accounts(pg::connection& conn, const run_reads& in, std::int64_t w,
                                          std::chrono::milliseconds timeout, check_result& out) {
  auto lot_findings = find_lot_findings(in);
  const auto ledger = keyed_by_account<ledger_col>(in.ledger);
  const auto open_holds = keyed_by_account<open_hold_col>(in.open_holds);
  const auto before = checkpoints_before(in);
  out.accounts = in.accounts.rows();
  for (auto account : pg::rows_of<account_col>(in.accounts)) {
    const auto key = account_of(account);
    const std::int64_t balance = account.int64(account_col::balance), held = account.int64(account_col::held);
    const auto l = ledger.find(key);
    const auto h = open_holds.find(key);
    const bool has_ledger = l != ledger.end();
    const std::int64_t upto = has_ledger ? l->second.int64(ledger_col::upto) : 0;
    const std::int64_t after = has_ledger ? l->second.int64(ledger_col::after) : 0;
    const bool has_opening = has_ledger && l->second.boolean(ledger_col::opening);
    const std::int64_t dups = has_ledger ? l->second.int64(ledger_col::dups) : 0;
    const std::int64_t last_seq = has_ledger ? l->second.int64(ledger_col::last_seq) : 0;
    const std::int64_t open_held = h == open_holds.end() ? 0 : h->second.int64(open_hold_col::held);
    const std::int64_t snapshot = balance - after;
    auto lots = lot_findings.find(key);
    const bool lots_agree = lots == lot_findings.end();
    const auto b = before.find(key);
    const checkpoint previous = b == before.end() ? checkpoint{} : b->second;
    const bool agrees = upto == snapshot && held == open_held && dups == 0 && has_opening && lots_agree;
    const auto next = next_checkpoint(previous, agrees, last_seq, upto);
    if (b == before.end() || next.seq != previous.seq || next.balance != previous.balance ||
        next.clean != previous.clean)
      out.checkpoints.add(key, next);
    if (agrees) continue;
    // Only accounts that differ are read entry by entry for classification.
    pg::result entries;
    std::vector<pg::param> params{key.first, key.second, std::to_string(w)};
    if (auto err = co_await conn.async_exec(sql_account_entries_upto, std::move(params), entries, timeout))
      co_return err;
    std::vector<entry_view> views;
    using e = entry_col;
    for (auto row : pg::rows_of<e>(entries))
      views.push_back({row.int64(e::seq), std::string(row.text(e::biz_type)), std::string(row.text(e::biz_id)),
                       row.int64(e::delta), row.opt_int64(e::reverses)});
    out.differing.push_back(reconcile_account(key.first, key.second, snapshot, after, held, open_held, views,
                                              lots_agree ? std::vector<finding>{} : std::move(lots->second)));
  }
  co_return pg::error{};
}

}  // namespace tally::shard
