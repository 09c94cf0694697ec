#include "account_shard/store/queries.hpp"

#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "account_shard/ledger/reconcile.hpp"
#include "account_shard/store/fence.hpp"
#include "common/pg/transaction.hpp"
#include "common/projection/next_expiry.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::shard {

namespace asio = boost::asio;

namespace {

// An account's columns in the order account_json() reads them, with its next expiry.
#define TALLY_ACCOUNT_SELECT                                                        \
  "SELECT a.tenant, a.account_id, a.balance, a.held, a.status, a.version, "         \
  "to_char(a.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), " \
  "nx.next_expiry_ms, nx.next_expiry_amount "                                       \
  "FROM account a" TALLY_NEXT_EXPIRY_JOIN
constexpr std::string_view sql_account = TALLY_ACCOUNT_SELECT "WHERE a.tenant = $1 AND a.account_id = $2";
// An account's lots in consumption order, after lot $3 (0: from the first).
// A lot's expiry never changes, so its id alone marks a place in the order.
constexpr std::string_view sql_lots =
    "SELECT l.lot_id, l.granted, l.remaining, l.held, l.expired, (extract(epoch FROM l.expires_at) * 1000)::bigint, "
    "l.rule_version, l.state, l.origin, l.grace_ms, to_char(l.created_at AT TIME ZONE 'UTC', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM lot l "
    "LEFT JOIN lot c ON c.tenant = $1 AND c.account_id = $2 AND c.lot_id = $3 "
    "WHERE l.tenant = $1 AND l.account_id = $2 AND ($4 = 'all' OR l.state = 'open') "
    "AND ($3::bigint = 0 OR c.lot_id IS NOT NULL) AND (c.lot_id IS NULL OR (coalesce(l.expires_at, 'infinity'), "
    "l.lot_id) > "
    "(coalesce(c.expires_at, 'infinity'), c.lot_id)) "
    "ORDER BY coalesce(l.expires_at, 'infinity'), l.lot_id LIMIT $5";
// A frozen account's lots wait until it is unfrozen (its writes are refused).
constexpr std::string_view sql_due_lots =
    "SELECT l.tenant, l.account_id, l.lot_id FROM lot l JOIN account a USING (tenant, account_id) "
    "WHERE l.state = 'open' AND a.status = 'active' "
    "AND l.expires_at <= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond' ORDER BY l.expires_at LIMIT $2";
// Reconciliation reads each table on its own, or probes another by key from
// a LATERAL subquery (OFFSET 0 keeps it from being merged into a join, so
// the probe is the only way in), and joins the rows in memory by key. A
// join in SQL would leave the run to the planner's statistics, which crash
// recovery leaves stale until the next analyse: after a chaos run's
// restarts, the open holds' parts joined in SQL ran on the CPU past the
// 5 s statement time-out (0.2 ms once the tables were analysed).
constexpr std::string_view sql_reconcile_accounts =
    "SELECT tenant, account_id, balance, held FROM account WHERE $1::text IS NULL OR tenant = $1 "
    "ORDER BY tenant, account_id";
// Per account: Σ entries up to the watermark $2 and after it, whether it
// has an opening entry, and how many entries repeat a business key.
constexpr std::string_view sql_reconcile_ledger =
    "SELECT tenant, account_id, coalesce(sum(delta) FILTER (WHERE seq <= $2), 0), "
    "coalesce(sum(delta) FILTER (WHERE seq > $2), 0), bool_or(biz_type = 'open_account'), "
    "count(*) - count(DISTINCT (biz_type, biz_id)) FROM ledger_entry WHERE $1::text IS NULL OR tenant = $1 "
    "GROUP BY tenant, account_id";
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
constexpr std::string_view sql_entries =
    "SELECT seq, biz_type, biz_id, delta, balance_after, reverses, "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
    "FROM ledger_entry WHERE tenant = $1 AND account_id = $2 AND seq > $3 ORDER BY seq LIMIT $4";
constexpr std::string_view sql_holds =
    "SELECT hold_id, amount, captured, state, "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
    "FROM hold WHERE tenant = $1 AND account_id = $2 ORDER BY created_at, hold_id";
constexpr std::string_view sql_old_holds =
    "SELECT tenant, account_id, hold_id, amount, "
    "(extract(epoch FROM now() - created_at) * 1000)::bigint FROM hold "
    "WHERE state = 'held' AND created_at < now() - make_interval(secs => $1::bigint / 1000.0) "
    "ORDER BY created_at LIMIT $2";
constexpr std::string_view sql_operation =
    "SELECT state, amount, reason, balance_after, held_after, version_after, ledger_seq, refunded, request_hash "
    "FROM operation WHERE tenant = $1 AND account_id = $2 AND biz_type = $3 AND biz_id = $4";
constexpr std::string_view sql_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
constexpr std::string_view sql_max_seq = "SELECT coalesce(max(seq), 0) FROM ledger_entry";
constexpr std::string_view sql_outbox_backlog =
    "WITH c AS (SELECT coalesce((SELECT tx_id FROM relay_cursor WHERE consumer = 'projection'), '0'::xid8) AS tx_id, "
    "  coalesce((SELECT id FROM relay_cursor WHERE consumer = 'projection'), 0) AS id) "
    "SELECT count(*), coalesce((extract(epoch FROM now() - min(o.created_at)) * 1000)::bigint, 0) "
    "FROM outbox_event o, c WHERE (o.tx_id, o.id) > (c.tx_id, c.id)";
constexpr std::string_view sql_account_entries_upto =
    "SELECT seq, biz_type, biz_id, delta, reverses FROM ledger_entry "
    "WHERE tenant = $1 AND account_id = $2 AND seq <= $3 ORDER BY seq";
constexpr std::string_view sql_accounts_by_status =
    TALLY_ACCOUNT_SELECT "WHERE a.tenant = $1 AND a.status = $2 ORDER BY a.account_id LIMIT $3";
constexpr std::string_view sql_record_reconciliation =
    "INSERT INTO reconciliation_run (tenant, watermark, differences, classes, frozen, report) "
    "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb)";
// A tenant's runs, and the runs over every tenant, newest first.
constexpr std::string_view sql_reconciliation_runs =
    "SELECT run_id, to_char(ran_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), watermark, "
    "differences, classes::text, frozen::text, report::text FROM reconciliation_run "
    "WHERE tenant IS NOT DISTINCT FROM $1 ORDER BY run_id DESC LIMIT $2";
constexpr std::string_view sql_set_status =
    "WITH u AS (UPDATE account SET status = $3, version = version + 1, updated_at = now() "
    "  WHERE tenant = $1 AND account_id = $2 AND status <> $3 AND status <> 'closed' "
    "  RETURNING tenant, account_id, balance, held, status, version) "
    "INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload) "
    "SELECT a.tenant, a.account_id, a.version, 'account.' || $3, jsonb_build_object('tenant', a.tenant, "
    "'account_id', a.account_id, 'balance', a.balance, 'held', a.held, 'available', a.balance - a.held, "
    "'status', a.status, 'version', a.version, 'next_expiry', CASE WHEN nx.next_expiry_ms IS NULL THEN NULL ELSE "
    "jsonb_build_object('at', to_char(('epoch'::timestamptz + nx.next_expiry_ms * interval '1 millisecond') "
    "AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'amount', nx.next_expiry_amount) END) "
    "FROM u a" TALLY_NEXT_EXPIRY_JOIN;

// ---- reconciliation: the reads joined in memory ----
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

// The lot_mismatch findings per account, from sql_reconcile_accounts,
// _lots, _lot_parts, _held_parts, _expire_entries and _allocations: each
// lot beside what the operations naming it add up to, each operation whose
// parts differ from its entry, each account whose lots do not add up to
// its balance and held.
std::map<account_key, std::vector<finding>> find_lot_findings(const pg::result& accounts, const pg::result& lots,
                                                              const pg::result& parts, const pg::result& held_parts,
                                                              const pg::result& expire_entries,
                                                              const pg::result& allocations) {
  std::map<account_key, std::vector<finding>> out;
  const auto by_parts = keyed_by_lot(parts);
  const auto by_held = keyed_by_lot(held_parts);
  std::map<std::tuple<std::string, std::string, std::string>, std::int64_t> expire_count;
  for (int i = 0; i < expire_entries.rows(); ++i)
    expire_count.emplace(std::tuple{std::string(expire_entries.text(i, 0)), std::string(expire_entries.text(i, 1)),
                                    std::string(expire_entries.text(i, 2))},
                         expire_entries.int64(i, 3));
  std::map<account_key, std::pair<std::int64_t, std::int64_t>> lot_sums;  // Σ remaining, Σ held
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
               p == by_parts.end() ? 0 : parts.int64(p->second, 3),
               h == by_held.end() ? 0 : held_parts.int64(h->second, 3),
               x == expire_count.end() ? 0 : x->second,
               p == by_parts.end() ? 0 : parts.int64(p->second, 4)};
    auto& sums = lot_sums[account_of(lots, i)];
    sums.first += v.remaining;
    sums.second += v.held;
    std::vector<finding> found;
    find_lot_mismatches(v, found);
    if (found.empty()) continue;
    auto& list = out[account_of(lots, i)];
    list.insert(list.end(), found.begin(), found.end());
  }
  for (int i = 0; i < allocations.rows(); ++i)
    out[account_of(allocations, i)].push_back(
        {"lot_mismatch", allocations.int64(i, 4) - std::abs(allocations.int64(i, 5)),
         std::string(allocations.text(i, 2)), std::string(allocations.text(i, 3)), std::nullopt});
  for (int i = 0; i < accounts.rows(); ++i) {
    const auto key = account_of(accounts, i);
    const auto sums = lot_sums.find(key);
    const auto [remaining, held] = sums == lot_sums.end() ? std::pair<std::int64_t, std::int64_t>{} : sums->second;
    const std::int64_t balance = accounts.int64(i, 2), account_held = accounts.int64(i, 3);
    if (balance != remaining) out[key].push_back({"lot_mismatch", balance - remaining, "", "", std::nullopt});
    if (account_held != held) out[key].push_back({"lot_mismatch", account_held - held, "", "", std::nullopt});
  }
  return out;
}

}  // namespace

nlohmann::json account_json(const pg::result& r, int row, int c) {
  auto balance = r.int64(row, c + 2);
  auto held = r.int64(row, c + 3);
  nlohmann::json j = {{"tenant", r.text(row, c)},
                      {"account_id", r.text(row, c + 1)},
                      {"balance", balance},
                      {"held", held},
                      {"available", balance - held},
                      {"status", r.text(row, c + 4)},
                      {"version", r.int64(row, c + 5)},
                      {"updated_at", r.text(row, c + 6)}};
  j["next_expiry"] = projection::next_expiry_doc(r.opt_int64(row, c + 7), r.opt_int64(row, c + 8).value_or(0));
  return j;
}

asio::awaitable<pg::error> queries::async_read(std::span<const pg::statement> statements,
                                               std::vector<pg::result>& out) {
  pg::lease conn;
  if (auto err = co_await readers_.async_acquire(conn)) co_return err;
  co_return co_await conn->async_pipeline(statements, out, timeout_);
}

asio::awaitable<query_result> queries::async_account(std::string tenant, std::string account_id) {
  query_result out;
  std::vector<pg::statement> st{{sql_account, {tenant, account_id}}};
  std::vector<pg::result> r;
  if ((out.error = co_await async_read(st, r))) co_return out;
  out.found = r[0].rows() == 1;
  if (out.found) out.body = account_json(r[0], 0, 0);
  co_return out;
}

asio::awaitable<query_result> queries::async_entries(std::string tenant, std::string account_id, std::int64_t after,
                                                     int limit) {
  query_result out;
  std::vector<pg::statement> st{{sql_account, {tenant, account_id}},
                                {sql_entries, {tenant, account_id, std::to_string(after), std::to_string(limit)}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.found = rs[0].rows() == 1;
  if (!out.found) co_return out;
  const auto& r = rs[1];
  nlohmann::json entries = nlohmann::json::array();
  for (int i = 0; i < r.rows(); ++i) {
    nlohmann::json e = {{"seq", r.int64(i, 0)},   {"biz_type", r.text(i, 1)},       {"biz_id", r.text(i, 2)},
                        {"delta", r.int64(i, 3)}, {"balance_after", r.int64(i, 4)}, {"created_at", r.text(i, 6)}};
    if (!r.is_null(i, 5)) e["reverses"] = r.int64(i, 5);
    entries.push_back(std::move(e));
  }
  bool more = r.rows() == limit;
  out.body = {{"entries", std::move(entries)},
              {"next", more ? nlohmann::json(std::to_string(r.int64(r.rows() - 1, 0))) : nlohmann::json(nullptr)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_holds(std::string tenant, std::string account_id) {
  query_result out;
  std::vector<pg::statement> st{{sql_holds, {tenant, account_id}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  const auto& r = rs[0];
  nlohmann::json holds = nlohmann::json::array();
  for (int i = 0; i < r.rows(); ++i)
    holds.push_back({{"hold_id", r.text(i, 0)},
                     {"amount", r.int64(i, 1)},
                     {"captured", r.int64(i, 2)},
                     {"state", r.text(i, 3)},
                     {"created_at", r.text(i, 4)}});
  out.body = {{"holds", std::move(holds)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_old_holds(std::int64_t older_than_ms, int limit) {
  query_result out;
  std::vector<pg::statement> st{{sql_old_holds, {std::to_string(older_than_ms), std::to_string(limit)}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  const auto& r = rs[0];
  nlohmann::json holds = nlohmann::json::array();
  for (int i = 0; i < r.rows(); ++i)
    holds.push_back({{"tenant", r.text(i, 0)},
                     {"account_id", r.text(i, 1)},
                     {"hold_id", r.text(i, 2)},
                     {"amount", r.int64(i, 3)},
                     {"age_ms", r.int64(i, 4)}});
  out.body = {{"holds", std::move(holds)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_operation(std::string tenant, std::string account_id, std::string biz_type,
                                                       std::string biz_id) {
  query_result out;
  std::vector<pg::statement> st{{sql_operation, {tenant, account_id, biz_type, biz_id}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  const auto& r = rs[0];
  out.found = r.rows() == 1;
  if (!out.found) co_return out;
  out.body = {{"tenant", tenant},
              {"account_id", account_id},
              {"biz_type", biz_type},
              {"biz_id", biz_id},
              {"state", r.text(0, 0)},
              {"amount", r.int64(0, 1)},
              {"balance_after", r.int64(0, 3)},
              {"held_after", r.int64(0, 4)},
              {"version", r.int64(0, 5)},
              {"refunded", r.int64(0, 7)},
              {"request_hash", r.text(0, 8)}};
  out.body["code"] = r.is_null(0, 2) ? nlohmann::json(nullptr) : nlohmann::json(r.text(0, 2));
  out.body["ledger_seq"] = r.is_null(0, 6) ? nlohmann::json(nullptr) : nlohmann::json(r.int64(0, 6));
  co_return out;
}

asio::awaitable<query_result> queries::async_reconcile(std::optional<std::int64_t> watermark, bool freeze,
                                                       std::int64_t writer_epoch, std::optional<std::string> tenant) {
  query_result out;
  std::vector<account_reconciliation> differing;
  std::int64_t w = 0;
  std::int64_t accounts = 0;
  {
    pg::lease conn;
    if ((out.error = co_await readers_.async_acquire(conn))) co_return out;
    std::vector<pg::statement> start{{sql_snapshot, {}}, {sql_max_seq, {}}};
    std::vector<pg::result> rs;
    if ((out.error = co_await conn->async_pipeline(start, rs, timeout_))) co_return out;
    w = watermark.value_or(rs[1].int64(0, 0));
    std::vector<pg::statement> reads{
        {sql_reconcile_accounts, {tenant}},       {sql_reconcile_ledger, {tenant, std::to_string(w)}},
        {sql_reconcile_open_holds, {tenant}},     {sql_reconcile_lots, {tenant}},
        {sql_reconcile_lot_parts, {tenant}},      {sql_reconcile_held_parts, {tenant}},
        {sql_reconcile_expire_entries, {tenant}}, {sql_reconcile_allocations, {tenant}}};
    if ((out.error = co_await conn->async_pipeline(reads, rs, timeout_))) co_return out;
    auto lot_findings = find_lot_findings(rs[0], rs[3], rs[4], rs[5], rs[6], rs[7]);
    const auto ledger = keyed_by_account(rs[1]);
    const auto open_holds = keyed_by_account(rs[2]);
    const auto& totals = rs[0];
    accounts = totals.rows();
    for (int i = 0; i < totals.rows(); ++i) {
      const auto key = account_of(totals, i);
      const std::int64_t balance = totals.int64(i, 2), held = totals.int64(i, 3);
      const auto l = ledger.find(key);
      const auto h = open_holds.find(key);
      const std::int64_t upto = l == ledger.end() ? 0 : rs[1].int64(l->second, 2);
      const std::int64_t after = l == ledger.end() ? 0 : rs[1].int64(l->second, 3);
      const bool has_opening = l != ledger.end() && rs[1].boolean(l->second, 4);
      const std::int64_t dups = l == ledger.end() ? 0 : rs[1].int64(l->second, 5);
      const std::int64_t open_held = h == open_holds.end() ? 0 : rs[2].int64(h->second, 2);
      const std::int64_t snapshot = balance - after;
      auto lots = lot_findings.find(key);
      const bool lots_agree = lots == lot_findings.end();
      if (upto == snapshot && held == open_held && dups == 0 && has_opening && lots_agree) continue;
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
    if (freeze && d.needs_freeze()) {
      auto r = co_await async_set_status(d.tenant, d.account_id, "frozen", writer_epoch);
      if (r.error) {
        out.error = r.error;
        co_return out;
      }
      frozen.push_back({{"tenant", d.tenant}, {"account_id", d.account_id}});
      frozen_ids.push_back(d.account_id);
    }
  }
  out.body = {{"watermark", w},
              {"accounts", accounts},
              {"differences", report.size()},
              {"accounts_with_differences", std::move(report)},
              {"frozen", std::move(frozen)}};
  // Kept for the operators' "last reports" (the run's answer, as given).
  std::vector<pg::statement> record{{sql_record_reconciliation,
                                     {tenant, std::to_string(w), std::to_string(differing.size()),
                                      class_counts(differing).dump(), frozen_ids.dump(), out.body.dump()}}};
  std::vector<pg::result> ignored;
  out.error = co_await async_fenced_write(std::move(record), writer_epoch, ignored);
  co_return out;
}

asio::awaitable<query_result> queries::async_lots(std::string tenant, std::string account_id, lot_page page) {
  query_result out;
  std::vector<pg::statement> st{
      {sql_account, {tenant, account_id}},
      {sql_lots,
       {tenant, account_id, std::to_string(page.after), page.all ? "all" : "open", std::to_string(page.limit)}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.found = rs[0].rows() == 1;
  if (!out.found) co_return out;
  const auto& r = rs[1];
  auto lots = nlohmann::json::array();
  for (int i = 0; i < r.rows(); ++i) {
    auto expires = r.opt_int64(i, 5);
    nlohmann::json l = {{"lot_id", r.int64(i, 0)},
                        {"granted", r.int64(i, 1)},
                        {"remaining", r.int64(i, 2)},
                        {"held", r.int64(i, 3)},
                        {"expired", r.int64(i, 4)},
                        {"expires_at", expires ? nlohmann::json(time::rfc3339_ms(*expires)) : nlohmann::json()},
                        {"rule_version", r.text(i, 6)},
                        {"state", r.text(i, 7)},
                        {"origin", r.text(i, 8)},
                        {"created_at", r.text(i, 10)}};
    if (auto grace = r.opt_int64(i, 9)) l["grace_ms"] = *grace;
    lots.push_back(std::move(l));
  }
  // As the entries' cursor: the last id of a full page, as a string.
  nlohmann::json next = nullptr;
  if (r.rows() == page.limit) next = std::to_string(r.int64(r.rows() - 1, 0));
  out.body = {{"lots", std::move(lots)}, {"next", std::move(next)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_due_lots(std::int64_t now_ms, int limit) {
  query_result out;
  std::vector<pg::statement> st{{sql_due_lots, {std::to_string(now_ms), std::to_string(limit)}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.body = nlohmann::json::array();
  for (int i = 0; i < rs[0].rows(); ++i) out.body.push_back({rs[0].text(i, 0), rs[0].text(i, 1), rs[0].int64(i, 2)});
  co_return out;
}

asio::awaitable<query_result> queries::async_outbox_backlog() {
  query_result out;
  std::vector<pg::statement> st{{sql_outbox_backlog, {}}};
  std::vector<pg::result> r;
  if ((out.error = co_await async_read(st, r))) co_return out;
  out.found = true;
  out.body = {{"undelivered", r[0].int64(0, 0)}, {"oldest_undelivered_age_ms", r[0].int64(0, 1)}};
  co_return out;
}

asio::awaitable<pg::error> queries::async_fenced_write(std::vector<pg::statement> writes, std::int64_t writer_epoch,
                                                       std::vector<pg::result>& out) {
  pg::lease conn;
  if (auto err = co_await writers_.async_acquire(conn)) co_return err;
  std::vector<pg::statement> st{{pg::sql_begin, {}}, {sql_fence_shared, {}}, {sql_read_epoch, {}}};
  for (auto& w : writes) st.push_back(std::move(w));
  std::vector<pg::result> rs;
  auto err = co_await conn->async_pipeline(st, rs, timeout_);
  if (!err && rs[2].int64(0, 0) != writer_epoch)
    err = pg::error{make_error_code(pg::errc::fenced), "", "another writer took over this shard"};
  if (err) {
    co_await pg::async_rollback(*conn, timeout_);
    co_return err;
  }
  pg::result ignored;
  if ((err = co_await conn->async_exec(pg::sql_commit, ignored, timeout_))) co_return err;
  out.assign(std::make_move_iterator(rs.begin() + 3), std::make_move_iterator(rs.end()));
  co_return pg::error{};
}

asio::awaitable<query_result> queries::async_set_status(std::string tenant, std::string account_id, std::string status,
                                                        std::int64_t writer_epoch) {
  query_result out;
  // Named: GCC 12 miscompiles a braced temporary in a co_await operand.
  std::vector<pg::statement> writes{{sql_set_status, {tenant, account_id, status}},
                                    {sql_account, {tenant, account_id}}};
  std::vector<pg::result> rs;
  out.error = co_await async_fenced_write(std::move(writes), writer_epoch, rs);
  if (out.error) co_return out;
  out.found = rs[1].rows() == 1;
  if (out.found) out.body = account_json(rs[1], 0, 0);
  co_return out;
}

asio::awaitable<query_result> queries::async_accounts_by_status(std::string tenant, std::string status, int limit) {
  query_result out;
  std::vector<pg::statement> st{{sql_accounts_by_status, {tenant, status, std::to_string(limit)}}};
  std::vector<pg::result> r;
  if ((out.error = co_await async_read(st, r))) co_return out;
  auto accounts = nlohmann::json::array();
  for (int i = 0; i < r[0].rows(); ++i) accounts.push_back(account_json(r[0], i, 0));
  out.body = {{"accounts", std::move(accounts)}};
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
                       {"watermark", r[0].int64(i, 2)},
                       {"differences", r[0].int64(i, 3)},
                       {"classes", nlohmann::json::parse(r[0].text(i, 4))},
                       {"frozen", nlohmann::json::parse(r[0].text(i, 5))},
                       {"report", nlohmann::json::parse(r[0].text(i, 6))}});
  }
  out.body = {{"reports", std::move(reports)}};
  co_return out;
}

}  // namespace tally::shard
