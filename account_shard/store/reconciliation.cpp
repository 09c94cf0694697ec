// Reconciliation (queries::async_reconcile) and its recorded runs. A full
// run reads every account of the scope in one snapshot; an incremental one
// only the accounts written since the last run of its scope (entries after
// its watermark), those with open holds and those that differed last time,
// each from its checkpoint (account_checkpoint: where its last clean check
// ended) — so its cost follows what was written since, not the history.
#include <utility>
#include <vector>

#include "account_shard/ledger/reconcile.hpp"
#include "account_shard/store/account_check.hpp"
#include "account_shard/store/account_check_statements.hpp"
#include "account_shard/store/queries.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;
using namespace check_sql;

namespace {

// A full run's statements are in account_check_statements.hpp.

// ---- incremental ----
// Where the last run of the scope ended: of the tenant $1, or of every
// tenant (a run over every tenant covers each one).
constexpr std::string_view sql_reconcile_since =
    "SELECT coalesce(max(watermark), 0) FROM reconciliation_run WHERE tenant IS NULL OR tenant = $1";
enum class since_col { watermark };
// The accounts to check: written since $2 (the ledger's primary key), with
// an open hold, or differing at their last check.
constexpr std::string_view sql_reconcile_touched =
    "SELECT tenant, account_id FROM ledger_entry WHERE seq > $2 AND ($1::text IS NULL OR tenant = $1) "
    "UNION SELECT tenant, account_id FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1) "
    "UNION SELECT tenant, account_id FROM account_checkpoint WHERE NOT clean AND ($1::text IS NULL OR tenant = $1) "
    "ORDER BY 1, 2";
enum class touched_col { tenant, account_id };  // in select order

constexpr std::string_view sql_record_reconciliation =
    "INSERT INTO reconciliation_run (tenant, watermark, differences, classes, frozen, report, mode, since) "
    "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7, $8)";
// A tenant's runs, and the runs over every tenant, newest first.
constexpr std::string_view sql_reconciliation_runs =
    "SELECT run_id, to_char(ran_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), watermark, "
    "differences, classes::text, frozen::text, report::text, mode, since FROM reconciliation_run "
    "WHERE tenant IS NOT DISTINCT FROM $1 ORDER BY run_id DESC LIMIT $2";
enum class run_col { run_id, ran_at, watermark, differences, classes, frozen, report, mode, since };  // in select order

nlohmann::json run_json(const pg::row<run_col>& row) {
  using c = run_col;
  return {{"report_id", row.int64(c::run_id)},
          {"ran_at", std::string(row.text(c::ran_at))},
          {"mode", std::string(row.text(c::mode))},
          {"watermark", row.int64(c::watermark)},
          {"since", row.is_null(c::since) ? nlohmann::json(nullptr) : nlohmann::json(row.int64(c::since))},
          {"differences", row.int64(c::differences)},
          {"classes", nlohmann::json::parse(row.text(c::classes))},
          {"frozen", nlohmann::json::parse(row.text(c::frozen))},
          {"report", nlohmann::json::parse(row.text(c::report))}};
}

}  // namespace

asio::awaitable<query_result> queries::async_reconcile(reconcile_request rq, std::int64_t writer_epoch) {
  query_result out;
  const auto& tenant = rq.tenant;
  const bool incremental = rq.mode == reconcile_mode::incremental;
  check_result checked;
  std::int64_t w = 0;
  std::int64_t since = 0;
  {
    pg::lease conn;
    if ((out.error = co_await readers_.async_acquire(conn))) co_return out;
    std::vector<pg::statement> start{{sql_check_snapshot, {}}, {sql_max_seq, {}}, {sql_reconcile_since, {tenant}}};
    std::vector<pg::result> rs;
    if ((out.error = co_await conn->async_pipeline(start, rs, timeout_))) co_return out;
    w = rq.watermark.value_or(pg::row<max_seq_col>(rs[1], 0).int64(max_seq_col::seq));
    since = pg::row<since_col>(rs[2], 0).int64(since_col::watermark);
    if (incremental && w < since) {
      co_await pg::async_rollback(*conn, timeout_);
      out.refusal = "an incremental run's watermark cannot be below the last run's (" + std::to_string(since) +
                    "); run mode=full";
      co_return out;
    }
    std::vector<pg::result> reads;
    run_reads in;
    if (incremental) {
      std::vector<pg::statement> touched{{sql_reconcile_touched, {tenant, std::to_string(since)}}};
      if ((out.error = co_await conn->async_pipeline(touched, rs, timeout_))) co_return out;
      account_set set;
      for (auto row : pg::rows_of<touched_col>(rs[0]))
        set.add(std::string(row.text(touched_col::tenant)), std::string(row.text(touched_col::account_id)));
      auto st = check_statements(set, w, check_kind::since_checkpoint, tenant);
      if ((out.error = co_await conn->async_pipeline(st, reads, timeout_))) co_return out;
      in = reads_of(std::move(reads), check_kind::since_checkpoint);
    } else {
      std::vector<pg::statement> st{{sql_reconcile_accounts, {tenant}},
                                    {sql_reconcile_ledger, {tenant, std::to_string(w)}},
                                    {sql_reconcile_checkpoints, {tenant}},
                                    scope_open_holds(tenant),
                                    {sql_reconcile_lots, {tenant}},
                                    {sql_reconcile_lot_parts, {tenant}},
                                    scope_held_parts(tenant),
                                    {sql_reconcile_expire_entries, {tenant}},
                                    {sql_reconcile_allocations, {tenant}}};
      if ((out.error = co_await conn->async_pipeline(st, reads, timeout_))) co_return out;
      in.accounts = std::move(reads[0]);
      in.ledger = std::move(reads[1]);
      in.checkpoints = std::move(reads[2]);
      in.checkpoints_in_ledger = false;
      in.open_holds = std::move(reads[3]);
      in.lots = std::move(reads[4]);
      in.lot_parts = std::move(reads[5]);
      in.held_parts = std::move(reads[6]);
      in.expire_entries = std::move(reads[7]);
      in.allocations = std::move(reads[8]);
    }
    if ((out.error = co_await check_accounts(*conn, in, w, timeout_, checked))) co_return out;
    co_await pg::async_rollback(*conn, timeout_);
  }
  auto frozen = co_await freeze_differing(checked.differing, rq.freeze, writer_epoch);
  if ((out.error = frozen.error)) co_return out;
  nlohmann::json report = nlohmann::json::array();
  for (const auto& d : checked.differing) report.push_back(to_json(d));
  out.body = {{"mode", to_string(rq.mode)},
              {"watermark", w},
              {"since", incremental ? nlohmann::json(since) : nlohmann::json(nullptr)},
              {"accounts", checked.accounts},
              {"differences", report.size()},
              {"accounts_with_differences", std::move(report)},
              {"frozen", frozen.accounts}};
  // Kept for the operators' "last reports" (the run's answer, as given),
  // with the checkpoints the run leaves, in one transaction.
  std::vector<pg::statement> record{
      checked.checkpoints.statement(),
      {sql_record_reconciliation,
       {tenant, std::to_string(w), std::to_string(checked.differing.size()), class_counts(checked.differing).dump(),
        frozen.ids.dump(), out.body.dump(), std::string(to_string(rq.mode)),
        incremental ? std::optional<std::string>(std::to_string(since)) : std::nullopt}}};
  std::vector<pg::result> ignored;
  out.error = co_await async_fenced_write(std::move(record), writer_epoch, ignored);
  co_return out;
}

asio::awaitable<queries::frozen_accounts> queries::freeze_differing(
    const std::vector<account_reconciliation>& differing, bool freeze, std::int64_t writer_epoch) {
  frozen_accounts out;
  if (!freeze) co_return out;
  for (const auto& d : differing) {
    if (!d.needs_freeze()) continue;
    auto r = co_await async_set_status(d.tenant, d.account_id, "frozen", writer_epoch);
    if (r.error) {
      out.error = r.error;
      co_return out;
    }
    out.accounts.push_back({{"tenant", d.tenant}, {"account_id", d.account_id}});
    out.ids.push_back(d.account_id);
  }
  co_return out;
}

asio::awaitable<query_result> queries::async_reconciliation_runs(std::optional<std::string> tenant, int limit) {
  pg::statement st{sql_reconciliation_runs, {tenant, std::to_string(limit)}};
  co_return co_await async_list<run_col>(std::move(st), "reports", run_json);
}

}  // namespace tally::shard
