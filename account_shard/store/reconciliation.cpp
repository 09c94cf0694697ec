// Reconciliation (queries::async_reconcile) and its recorded runs. A full
// run reads every account of the scope in one snapshot; an incremental one
// only the accounts written since the last run of its scope (entries after
// its watermark), those with open holds and those that differed last time,
// each from its checkpoint (account_checkpoint: where its last clean check
// ended) — so its cost follows what was written since, not the history.
#include <cstdlib>
#include <map>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "account_shard/ledger/reconcile.hpp"
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
constexpr std::string_view sql_reconcile_open_holds =
    "SELECT tenant, account_id, sum(amount) FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1) "
    "GROUP BY tenant, account_id";
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
// Per lot: the parts of the open holds in it (each hold probes its operation).
constexpr std::string_view sql_reconcile_held_parts =
    "SELECT h.tenant, h.account_id, (p->>0)::bigint, sum((p->>1)::bigint) FROM hold h "
    "CROSS JOIN LATERAL (SELECT o.lots FROM operation o WHERE o.tenant = h.tenant AND o.account_id = h.account_id "
    "  AND o.biz_type = 'hold' AND o.biz_id = h.hold_id AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o "
    "CROSS JOIN LATERAL jsonb_array_elements(o.lots) p "
    "WHERE h.state = 'held' AND ($1::text IS NULL OR h.tenant = $1) GROUP BY 1, 2, 3";
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
#define TALLY_CHECKED_ACCOUNTS " unnest($1::text[], $2::text[]) AS k(tenant, account_id) "
constexpr std::string_view sql_incremental_accounts =
    "SELECT a.tenant, a.account_id, a.balance, a.held FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT tenant, account_id, balance, held FROM account a "
    "  WHERE a.tenant = k.tenant AND a.account_id = k.account_id OFFSET 0) a";
// As sql_reconcile_ledger, from each account's checkpoint: its balance
// plus the entries after it up to the watermark $3; an account clean once
// had its opening entry. Then the checkpoint itself (NULL: none).
constexpr std::string_view sql_incremental_ledger =
    "SELECT k.tenant, k.account_id, coalesce(c.balance, 0) + coalesce(e.upto, 0), coalesce(e.after, 0), "
    "coalesce(c.seq, 0) > 0 OR coalesce(e.opening, false), coalesce(e.dups, 0), "
    "greatest(coalesce(c.seq, 0), coalesce(e.last, 0)), c.seq, c.balance, c.clean FROM" TALLY_CHECKED_ACCOUNTS
    "LEFT JOIN LATERAL (SELECT seq, balance, clean FROM account_checkpoint c "
    "  WHERE c.tenant = k.tenant AND c.account_id = k.account_id OFFSET 0) c ON true "
    "CROSS JOIN LATERAL (SELECT sum(delta) FILTER (WHERE seq <= $3) AS upto, sum(delta) FILTER (WHERE seq > $3) "
    "  AS after, bool_or(biz_type = 'open_account') AS opening, count(*) - count(DISTINCT (biz_type, biz_id)) AS dups,"
    "  max(seq) FILTER (WHERE seq <= $3) AS last FROM ledger_entry e "
    "  WHERE e.tenant = k.tenant AND e.account_id = k.account_id AND e.seq > coalesce(c.seq, 0) OFFSET 0) e";
// The lots that hold value (open, or expired with a held part left).
constexpr std::string_view sql_incremental_lots =
    "SELECT l.tenant, l.account_id, l.lot_id, l.remaining, l.held, l.expired, l.state = 'expired' "
    "FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT * FROM lot l WHERE l.tenant = k.tenant AND l.account_id = k.account_id "
    "  AND (l.state = 'open' OR l.remaining > 0) OFFSET 0) l";
// As sql_reconcile_allocations, over the entries after each checkpoint,
// each probing its operation by key.
constexpr std::string_view sql_incremental_allocations =
    "SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, s.total, e.delta FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT e.seq, e.biz_type, e.biz_id, e.delta FROM ledger_entry e "
    "  WHERE e.tenant = k.tenant AND e.account_id = k.account_id AND e.seq > coalesce((SELECT c.seq FROM "
    "   account_checkpoint c WHERE c.tenant = k.tenant AND c.account_id = k.account_id), 0) OFFSET 0) e "
    "CROSS JOIN LATERAL (SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, o.lots FROM operation o "
    "  WHERE o.tenant = k.tenant AND o.account_id = k.account_id AND o.biz_type = e.biz_type AND o.biz_id = e.biz_id "
    "  AND o.ledger_seq = e.seq AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o "
    "CROSS JOIN LATERAL (SELECT sum((p->>1)::bigint) AS total FROM jsonb_array_elements(o.lots) p) s "
    "WHERE s.total <> abs(e.delta)";
#undef TALLY_CHECKED_ACCOUNTS

constexpr std::string_view sql_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
constexpr std::string_view sql_max_seq = "SELECT coalesce(max(seq), 0) FROM ledger_entry";
constexpr std::string_view sql_account_entries_upto =
    "SELECT seq, biz_type, biz_id, delta, reverses FROM ledger_entry "
    "WHERE tenant = $1 AND account_id = $2 AND seq <= $3 ORDER BY seq";
// The checkpoints that changed; a differing account keeps the seq and
// balance of its last clean check.
constexpr std::string_view sql_write_checkpoints =
    "INSERT INTO account_checkpoint AS c (tenant, account_id, seq, balance, clean) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[]) "
    "ON CONFLICT (tenant, account_id) DO UPDATE SET seq = EXCLUDED.seq, balance = EXCLUDED.balance, "
    "clean = EXCLUDED.clean, checked_at = now()";
constexpr std::string_view sql_record_reconciliation =
    "INSERT INTO reconciliation_run (tenant, watermark, differences, classes, frozen, report, mode, since) "
    "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7, $8)";
// A tenant's runs, and the runs over every tenant, newest first.
constexpr std::string_view sql_reconciliation_runs =
    "SELECT run_id, to_char(ran_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), watermark, "
    "differences, classes::text, frozen::text, report::text, mode, since FROM reconciliation_run "
    "WHERE tenant IS NOT DISTINCT FROM $1 ORDER BY run_id DESC LIMIT $2";

// Rows whose first two columns are tenant and account id.
using account_key = std::pair<std::string, std::string>;
using lot_key = std::tuple<std::string, std::string, std::int64_t>;  // (tenant, account id, lot id)

account_key account_of(const pg::result& r, int row) {
  return {std::string(r.text(row, 0)), std::string(r.text(row, 1))};
}

// Each row's index by its (tenant, account id).
std::map<account_key, int> keyed_by_account(const pg::result& r) {
  std::map<account_key, int> out;
  for (int i = 0; i < r.rows(); ++i) out.emplace(account_of(r, i), i);
  return out;
}

// Each row's index by its (tenant, account id, lot id in the third column).
std::map<lot_key, int> keyed_by_lot(const pg::result& r) {
  std::map<lot_key, int> out;
  for (int i = 0; i < r.rows(); ++i) out.emplace(lot_key{r.text(i, 0), r.text(i, 1), r.int64(i, 2)}, i);
  return out;
}

// What a run read, in one snapshot: the accounts to check and, per account,
// its ledger (tenant, account, rebuilt up to the watermark, Σ after it,
// has opening, repeated keys, last entry up to the watermark) and
// checkpoint, its open holds, its lots and what names them. `lot_parts`
// and `expire_entries` are empty in an incremental run (history_read).
struct run_reads {
  pg::result accounts, ledger, checkpoints, open_holds, lots, lot_parts, held_parts, expire_entries, allocations;
  bool history_read = true;
};

// The lot_mismatch findings per account: each lot beside what the
// operations naming it add up to (a full run) and the open holds' parts in
// it, each operation whose parts differ from its entry, each account whose
// lots do not add up to its balance and held.
std::map<account_key, std::vector<finding>> find_lot_findings(const run_reads& in) {
  std::map<account_key, std::vector<finding>> out;
  const auto by_parts = keyed_by_lot(in.lot_parts);
  const auto by_held = keyed_by_lot(in.held_parts);
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> expire_count;
  for (int i = 0; i < in.expire_entries.rows(); ++i)
    expire_count.emplace(
        std::tuple{std::string(in.expire_entries.text(i, 0)), std::string(in.expire_entries.text(i, 1)),
                   std::string(in.expire_entries.text(i, 2))},
        in.expire_entries.int64(i, 3));
  std::map<account_key, std::pair<std::int64_t, std::int64_t>> lot_sums;  // Σ remaining, Σ held
  const auto& lots = in.lots;
  for (int i = 0; i < lots.rows(); ++i) {
    const lot_key key{lots.text(i, 0), lots.text(i, 1), lots.int64(i, 2)};
    const auto p = by_parts.find(key);
    const auto h = by_held.find(key);
    const auto x = expire_count.find({std::get<0>(key), std::get<1>(key), std::to_string(std::get<2>(key))});
    lot_view v{std::get<2>(key),
               lots.int64(i, 3),
               lots.int64(i, 4),
               lots.int64(i, 5),
               lots.boolean(i, 6),
               p == by_parts.end() ? 0 : in.lot_parts.int64(p->second, 3),
               h == by_held.end() ? 0 : in.held_parts.int64(h->second, 3),
               x == expire_count.end() ? 0 : x->second,
               p == by_parts.end() ? 0 : in.lot_parts.int64(p->second, 4),
               in.history_read};
    auto& sums = lot_sums[account_of(lots, i)];
    sums.first += v.remaining;
    sums.second += v.held;
    std::vector<finding> found;
    find_lot_mismatches(v, found);
    if (found.empty()) continue;
    auto& list = out[account_of(lots, i)];
    list.insert(list.end(), found.begin(), found.end());
  }
  const auto& allocations = in.allocations;
  for (int i = 0; i < allocations.rows(); ++i)
    out[account_of(allocations, i)].push_back(
        {"lot_mismatch", allocations.int64(i, 4) - std::abs(allocations.int64(i, 5)),
         std::string(allocations.text(i, 2)), std::string(allocations.text(i, 3)), std::nullopt});
  for (int i = 0; i < in.accounts.rows(); ++i) {
    const auto key = account_of(in.accounts, i);
    const auto sums = lot_sums.find(key);
    const auto [remaining, held] = sums == lot_sums.end() ? std::pair<std::int64_t, std::int64_t>{} : sums->second;
    const std::int64_t balance = in.accounts.int64(i, 2), account_held = in.accounts.int64(i, 3);
    if (balance != remaining) out[key].push_back({"lot_mismatch", balance - remaining, "", "", std::nullopt});
    if (account_held != held) out[key].push_back({"lot_mismatch", account_held - held, "", "", std::nullopt});
  }
  return out;
}

// Each account's checkpoint before the run: from the incremental ledger
// read's last three columns, or (a full run) from the checkpoints read.
std::map<account_key, checkpoint> checkpoints_before(const run_reads& in) {
  std::map<account_key, checkpoint> out;
  if (in.history_read) {
    for (int i = 0; i < in.checkpoints.rows(); ++i)
      out.emplace(account_of(in.checkpoints, i),
                  checkpoint{in.checkpoints.int64(i, 2), in.checkpoints.int64(i, 3), in.checkpoints.boolean(i, 4)});
    return out;
  }
  for (int i = 0; i < in.ledger.rows(); ++i)
    if (!in.ledger.is_null(i, 7))
      out.emplace(account_of(in.ledger, i),
                  checkpoint{in.ledger.int64(i, 7), in.ledger.int64(i, 8), in.ledger.boolean(i, 9)});
  return out;
}

template <class T>
std::string literal(const std::vector<T>& items) {
  return pg::array_literal(std::span<const T>(items));
}

// The arrays of sql_write_checkpoints.
struct checkpoint_writes {
  std::vector<std::string> tenants, accounts;
  std::vector<std::int64_t> seqs, balances;
  std::vector<std::string> clean;  // "t" or "f"
  void add(const account_key& key, const checkpoint& c) {
    tenants.push_back(key.first);
    accounts.push_back(key.second);
    seqs.push_back(c.seq);
    balances.push_back(c.balance);
    clean.emplace_back(c.clean ? "t" : "f");
  }
};

}  // namespace

asio::awaitable<query_result> queries::async_reconcile(reconcile_request rq, std::int64_t writer_epoch) {
  query_result out;
  const auto& tenant = rq.tenant;
  const bool incremental = rq.mode == reconcile_mode::incremental;
  std::vector<account_reconciliation> differing;
  checkpoint_writes checkpoints;
  std::int64_t w = 0;
  std::int64_t since = 0;
  run_reads in;
  in.history_read = !incremental;
  {
    pg::lease conn;
    if ((out.error = co_await readers_.async_acquire(conn))) co_return out;
    std::vector<pg::statement> start{{sql_snapshot, {}}, {sql_max_seq, {}}, {sql_reconcile_since, {tenant}}};
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
    if (incremental) {
      std::vector<pg::statement> touched{{sql_reconcile_touched, {tenant, std::to_string(since)}}};
      if ((out.error = co_await conn->async_pipeline(touched, rs, timeout_))) co_return out;
      std::vector<std::string> tenants, accounts;
      for (int i = 0; i < rs[0].rows(); ++i) {
        tenants.emplace_back(rs[0].text(i, 0));
        accounts.emplace_back(rs[0].text(i, 1));
      }
      const auto t = literal(tenants), a = literal(accounts);
      std::vector<pg::statement> st{
          {sql_incremental_accounts, {t, a}},   {sql_incremental_ledger, {t, a, std::to_string(w)}},
          {sql_reconcile_open_holds, {tenant}}, {sql_incremental_lots, {t, a}},
          {sql_reconcile_held_parts, {tenant}}, {sql_incremental_allocations, {t, a}}};
      if ((out.error = co_await conn->async_pipeline(st, reads, timeout_))) co_return out;
      in.accounts = std::move(reads[0]);
      in.ledger = std::move(reads[1]);
      in.open_holds = std::move(reads[2]);
      in.lots = std::move(reads[3]);
      in.held_parts = std::move(reads[4]);
      in.allocations = std::move(reads[5]);
    } else {
      std::vector<pg::statement> st{
          {sql_reconcile_accounts, {tenant}},    {sql_reconcile_ledger, {tenant, std::to_string(w)}},
          {sql_reconcile_checkpoints, {tenant}}, {sql_reconcile_open_holds, {tenant}},
          {sql_reconcile_lots, {tenant}},        {sql_reconcile_lot_parts, {tenant}},
          {sql_reconcile_held_parts, {tenant}},  {sql_reconcile_expire_entries, {tenant}},
          {sql_reconcile_allocations, {tenant}}};
      if ((out.error = co_await conn->async_pipeline(st, reads, timeout_))) co_return out;
      in.accounts = std::move(reads[0]);
      in.ledger = std::move(reads[1]);
      in.checkpoints = std::move(reads[2]);
      in.open_holds = std::move(reads[3]);
      in.lots = std::move(reads[4]);
      in.lot_parts = std::move(reads[5]);
      in.held_parts = std::move(reads[6]);
      in.expire_entries = std::move(reads[7]);
      in.allocations = std::move(reads[8]);
    }
    auto lot_findings = find_lot_findings(in);
    const auto ledger = keyed_by_account(in.ledger);
    const auto open_holds = keyed_by_account(in.open_holds);
    const auto before = checkpoints_before(in);
    const auto& totals = in.accounts;
    for (int i = 0; i < totals.rows(); ++i) {
      const auto key = account_of(totals, i);
      const std::int64_t balance = totals.int64(i, 2), held = totals.int64(i, 3);
      const auto l = ledger.find(key);
      const auto h = open_holds.find(key);
      const bool has_ledger = l != ledger.end();
      const std::int64_t upto = has_ledger ? in.ledger.int64(l->second, 2) : 0;
      const std::int64_t after = has_ledger ? in.ledger.int64(l->second, 3) : 0;
      const bool has_opening = has_ledger && in.ledger.boolean(l->second, 4);
      const std::int64_t dups = has_ledger ? in.ledger.int64(l->second, 5) : 0;
      const std::int64_t last_seq = has_ledger ? in.ledger.int64(l->second, 6) : 0;
      const std::int64_t open_held = h == open_holds.end() ? 0 : in.open_holds.int64(h->second, 2);
      const std::int64_t snapshot = balance - after;
      auto lots = lot_findings.find(key);
      const bool lots_agree = lots == lot_findings.end();
      const auto b = before.find(key);
      const checkpoint previous = b == before.end() ? checkpoint{} : b->second;
      const bool agrees = upto == snapshot && held == open_held && dups == 0 && has_opening && lots_agree;
      const auto next = next_checkpoint(previous, agrees, last_seq, upto);
      if (b == before.end() || next.seq != previous.seq || next.balance != previous.balance ||
          next.clean != previous.clean)
        checkpoints.add(key, next);
      if (agrees) continue;
      // Only accounts that differ are read entry by entry for classification.
      pg::result entries;
      std::vector<pg::param> params{key.first, key.second, std::to_string(w)};
      if ((out.error = co_await conn->async_exec(sql_account_entries_upto, std::move(params), entries, timeout_)))
        co_return out;
      std::vector<entry_view> views;
      for (int k = 0; k < entries.rows(); ++k)
        views.push_back({entries.int64(k, 0), std::string(entries.text(k, 1)), std::string(entries.text(k, 2)),
                         entries.int64(k, 3), entries.opt_int64(k, 4)});
      differing.push_back(reconcile_account(key.first, key.second, snapshot, after, held, open_held, views,
                                            lots_agree ? std::vector<finding>{} : std::move(lots->second)));
    }
    co_await pg::async_rollback(*conn, timeout_);
  }
  nlohmann::json report = nlohmann::json::array();
  nlohmann::json frozen = nlohmann::json::array();
  auto frozen_ids = nlohmann::json::array();
  for (const auto& d : differing) {
    report.push_back(to_json(d));
    if (rq.freeze && d.needs_freeze()) {
      auto r = co_await async_set_status(d.tenant, d.account_id, "frozen", writer_epoch);
      if (r.error) {
        out.error = r.error;
        co_return out;
      }
      frozen.push_back({{"tenant", d.tenant}, {"account_id", d.account_id}});
      frozen_ids.push_back(d.account_id);
    }
  }
  out.body = {{"mode", to_string(rq.mode)},
              {"watermark", w},
              {"since", incremental ? nlohmann::json(since) : nlohmann::json(nullptr)},
              {"accounts", in.accounts.rows()},
              {"differences", report.size()},
              {"accounts_with_differences", std::move(report)},
              {"frozen", std::move(frozen)}};
  // Kept for the operators' "last reports" (the run's answer, as given),
  // with the checkpoints the run leaves, in one transaction.
  std::vector<pg::statement> record{
      {sql_write_checkpoints,
       {literal(checkpoints.tenants), literal(checkpoints.accounts), literal(checkpoints.seqs),
        literal(checkpoints.balances), literal(checkpoints.clean)}},
      {sql_record_reconciliation,
       {tenant, std::to_string(w), std::to_string(differing.size()), class_counts(differing).dump(), frozen_ids.dump(),
        out.body.dump(), std::string(to_string(rq.mode)),
        incremental ? std::optional<std::string>(std::to_string(since)) : std::nullopt}}};
  std::vector<pg::result> ignored;
  out.error = co_await async_fenced_write(std::move(record), writer_epoch, ignored);
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
