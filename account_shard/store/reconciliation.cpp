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
#include "account_shard/store/queries.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;

std::string_view to_string(reconcile_mode m) { return m == reconcile_mode::full ? "full" : "incremental"; }

std::optional<reconcile_mode> reconcile_mode_from(std::string_view s) {
  if (s == "full") return reconcile_mode::full;
  if (s == "incremental") return reconcile_mode::incremental;
  return std::nullopt;
}

namespace {

// Reconciliation reads each table on its own, or probes another by key from
// a LATERAL subquery (OFFSET 0 keeps it from being merged into a join, so
// the probe is the only way in), and joins the rows in memory by key. A
// join in SQL would leave the run to the planner's statistics, which crash
// recovery leaves stale until the next analyse: after a chaos run's
// restarts, the open holds' parts joined in SQL ran on the CPU past the
// 5 s statement time-out (0.2 ms once the tables were analysed).
//
// A full run's statements take the tenant ($1, NULL: every tenant); an
// incremental run's take the accounts to check as two arrays ($1 tenants,
// $2 account ids), each account probed by key.
constexpr std::string_view sql_reconcile_accounts =
    "SELECT tenant, account_id, balance, held FROM account WHERE $1::text IS NULL OR tenant = $1 "
    "ORDER BY tenant, account_id";
// Per account: Σ entries up to the watermark $2 and after it, whether it
// has an opening entry, how many entries repeat a business key, and its
// last entry up to the watermark.
constexpr std::string_view sql_reconcile_ledger =
    "SELECT tenant, account_id, coalesce(sum(delta) FILTER (WHERE seq <= $2), 0), "
    "coalesce(sum(delta) FILTER (WHERE seq > $2), 0), bool_or(biz_type = 'open_account'), "
    "count(*) - count(DISTINCT (biz_type, biz_id)), coalesce(max(seq) FILTER (WHERE seq <= $2), 0) "
    "FROM ledger_entry WHERE $1::text IS NULL OR tenant = $1 GROUP BY tenant, account_id";
constexpr std::string_view sql_reconcile_checkpoints =
    "SELECT tenant, account_id, seq, balance, clean FROM account_checkpoint WHERE $1::text IS NULL OR tenant = $1";
constexpr std::string_view sql_reconcile_lots =
    "SELECT tenant, account_id, lot_id, remaining, held, expired, state = 'expired' FROM lot "
    "WHERE $1::text IS NULL OR tenant = $1 ORDER BY tenant, account_id, lot_id";
// Per lot: what the operations naming it add up to (granted and returned
// minus taken), and what the expire operations took from it.
constexpr std::string_view sql_reconcile_lot_parts =
    "SELECT o.tenant, o.account_id, (p->>0)::bigint, "
    "sum(CASE WHEN o.biz_type IN ('credit', 'refund', 'lot_migration') THEN (p->>1)::bigint "
    "  WHEN o.biz_type = 'hold' THEN 0 ELSE -(p->>1)::bigint END), "
    "coalesce(sum((p->>1)::bigint) FILTER (WHERE o.biz_type = 'expire'), 0) "
    "FROM operation o CROSS JOIN LATERAL jsonb_array_elements(o.lots) p "
    "WHERE o.state = 'succeeded' AND o.lots IS NOT NULL AND ($1::text IS NULL OR o.tenant = $1) GROUP BY 1, 2, 3";
// Per account and business id, its expire entries (a lot's biz_id: its id).
constexpr std::string_view sql_reconcile_expire_entries =
    "SELECT tenant, account_id, biz_id, count(*) FROM ledger_entry WHERE biz_type = 'expire' "
    "AND ($1::text IS NULL OR tenant = $1) GROUP BY 1, 2, 3";
// Operations whose lot parts do not add up to their ledger entry (each
// probes its entry by sequence number).
constexpr std::string_view sql_reconcile_allocations =
    "SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, s.total, e.delta FROM operation o "
    "CROSS JOIN LATERAL (SELECT e.delta FROM ledger_entry e WHERE e.seq = o.ledger_seq OFFSET 0) e "
    "CROSS JOIN LATERAL (SELECT sum((p->>1)::bigint) AS total FROM jsonb_array_elements(o.lots) p) s "
    "WHERE o.lots IS NOT NULL AND o.state = 'succeeded' AND ($1::text IS NULL OR o.tenant = $1) "
    "AND s.total <> abs(e.delta)";

// ---- incremental ----
// Where the last run of the scope ended: of the tenant $1, or of every
// tenant (a run over every tenant covers each one).
constexpr std::string_view sql_reconcile_since =
    "SELECT coalesce(max(watermark), 0) FROM reconciliation_run WHERE tenant IS NULL OR tenant = $1";
// The accounts to check: written since $2 (the ledger's primary key), with
// an open hold, or differing at their last check.
constexpr std::string_view sql_reconcile_touched =
    "SELECT tenant, account_id FROM ledger_entry WHERE seq > $2 AND ($1::text IS NULL OR tenant = $1) "
    "UNION SELECT tenant, account_id FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1) "
    "UNION SELECT tenant, account_id FROM account_checkpoint WHERE NOT clean AND ($1::text IS NULL OR tenant = $1) "
    "ORDER BY 1, 2";

constexpr std::string_view sql_record_reconciliation =
    "INSERT INTO reconciliation_run (tenant, watermark, differences, classes, frozen, report, mode, since) "
    "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7, $8)";
// A tenant's runs, and the runs over every tenant, newest first.
constexpr std::string_view sql_reconciliation_runs =
    "SELECT run_id, to_char(ran_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), watermark, "
    "differences, classes::text, frozen::text, report::text, mode, since FROM reconciliation_run "
    "WHERE tenant IS NOT DISTINCT FROM $1 ORDER BY run_id DESC LIMIT $2";

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
    w = rq.watermark.value_or(rs[1].int64(0, 0));
    since = rs[2].int64(0, 0);
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
      for (int i = 0; i < rs[0].rows(); ++i) set.add(std::string(rs[0].text(i, 0)), std::string(rs[0].text(i, 1)));
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
  query_result out;
  std::vector<pg::statement> st{{sql_reconciliation_runs, {tenant, std::to_string(limit)}}};
  std::vector<pg::result> r;
  if ((out.error = co_await async_read(st, r))) co_return out;
  auto reports = nlohmann::json::array();
  for (int i = 0; i < r[0].rows(); ++i) {
    reports.push_back({{"report_id", r[0].int64(i, 0)},
                       {"ran_at", std::string(r[0].text(i, 1))},
                       {"mode", std::string(r[0].text(i, 7))},
                       {"watermark", r[0].int64(i, 2)},
                       {"since", r[0].is_null(i, 8) ? nlohmann::json(nullptr) : nlohmann::json(r[0].int64(i, 8))},
                       {"differences", r[0].int64(i, 3)},
                       {"classes", nlohmann::json::parse(r[0].text(i, 4))},
                       {"frozen", nlohmann::json::parse(r[0].text(i, 5))},
                       {"report", nlohmann::json::parse(r[0].text(i, 6))}});
  }
  out.body = {{"reports", std::move(reports)}};
  co_return out;
}

}  // namespace tally::shard
