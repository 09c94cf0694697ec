#include "account_shard/store/batch.hpp"

#include <algorithm>
#include <compare>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "account_shard/store/batch_statements.hpp"
#include "account_shard/store/fence.hpp"
#include "common/failpoint/failpoint.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;
using pg::param;
using pg::sql_begin;
using pg::sql_commit;

using namespace batch_sql;

namespace {

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
  o.state = operation_state_from(r.text(c::state)).value_or(op_state::rejected);
  o.amount = r.int64(c::amount);
  if (!r.is_null(c::reason)) o.reason = contract::shard_code_from(r.text(c::reason));
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
  if (c.lots.empty()) return c.expires_at ? param{} : param{std::string(c.rule())};
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
  if (epoch.rows() != 1 || pg::row<epoch_col>(epoch, 0).int64(epoch_col::epoch) != ctx.writer_epoch) {
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
