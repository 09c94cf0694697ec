#include "account_shard/store/account_check.hpp"

#include <cstdlib>
#include <span>
#include <tuple>

namespace tally::shard {

namespace asio = boost::asio;

namespace {

// Each statement takes the accounts as $1 (tenants) and $2 (account ids)
// and probes each table by key from a LATERAL subquery that OFFSET 0 keeps
// from being merged into a join: the probe is the only plan, whatever the
// statistics say (crash recovery leaves them stale until the next analyse).
#define TALLY_CHECKED_ACCOUNTS " unnest($1::text[], $2::text[]) AS k(tenant, account_id) "
constexpr std::string_view sql_accounts = "SELECT a.tenant, a.account_id, a.balance, a.held FROM" TALLY_CHECKED_ACCOUNTS
                                          "CROSS JOIN LATERAL (SELECT tenant, account_id, balance, held FROM account a "
                                          "  WHERE a.tenant = k.tenant AND a.account_id = k.account_id OFFSET 0) a";
// Per account: Σ entries up to the watermark $3 and after it, whether it
// has an opening entry, how many entries repeat a business key, its last
// entry up to the watermark; then its checkpoint (NULL: none). From the
// checkpoint when $4 (its sum plus the entries after it; an account clean
// once had its opening entry), else from the first entry.
constexpr std::string_view sql_ledger =
    "SELECT k.tenant, k.account_id, CASE WHEN $4 THEN coalesce(c.balance, 0) ELSE 0 END + coalesce(e.upto, 0), "
    "coalesce(e.after, 0), ($4 AND coalesce(c.seq, 0) > 0) OR coalesce(e.opening, false), coalesce(e.dups, 0), "
    "greatest(CASE WHEN $4 THEN coalesce(c.seq, 0) ELSE 0 END, coalesce(e.last, 0)), c.seq, c.balance, c.clean "
    "FROM" TALLY_CHECKED_ACCOUNTS
    "LEFT JOIN LATERAL (SELECT seq, balance, clean FROM account_checkpoint c "
    "  WHERE c.tenant = k.tenant AND c.account_id = k.account_id OFFSET 0) c ON true "
    "CROSS JOIN LATERAL (SELECT sum(delta) FILTER (WHERE seq <= $3) AS upto, sum(delta) FILTER (WHERE seq > $3) "
    "  AS after, bool_or(biz_type = 'open_account') AS opening, count(*) - count(DISTINCT (biz_type, biz_id)) AS dups,"
    "  max(seq) FILTER (WHERE seq <= $3) AS last FROM ledger_entry e WHERE e.tenant = k.tenant "
    "  AND e.account_id = k.account_id AND e.seq > CASE WHEN $4 THEN coalesce(c.seq, 0) ELSE 0 END OFFSET 0) e";
// Every lot when $3, else the lots that hold value (open, or expired with a
// held part left).
constexpr std::string_view sql_lots =
    "SELECT l.tenant, l.account_id, l.lot_id, l.remaining, l.held, l.expired, l.state = 'expired' "
    "FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT * FROM lot l WHERE l.tenant = k.tenant AND l.account_id = k.account_id "
    "  AND ($3 OR l.state = 'open' OR l.remaining > 0) OFFSET 0) l";
// Per lot: what the operations naming it add up to (granted and returned
// minus taken), and what the expire operations took from it.
constexpr std::string_view sql_lot_parts =
    "SELECT k.tenant, k.account_id, (p->>0)::bigint, "
    "sum(CASE WHEN o.biz_type IN ('credit', 'refund', 'lot_migration') THEN (p->>1)::bigint "
    "  WHEN o.biz_type = 'hold' THEN 0 ELSE -(p->>1)::bigint END), "
    "coalesce(sum((p->>1)::bigint) FILTER (WHERE o.biz_type = 'expire'), 0) FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT o.biz_type, o.lots FROM operation o WHERE o.tenant = k.tenant "
    "  AND o.account_id = k.account_id AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o "
    "CROSS JOIN LATERAL jsonb_array_elements(o.lots) p GROUP BY 1, 2, 3";
constexpr std::string_view sql_open_holds =
    "SELECT k.tenant, k.account_id, sum(h.amount) FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT amount FROM hold h WHERE h.tenant = k.tenant AND h.account_id = k.account_id "
    "  AND h.state = 'held' OFFSET 0) h GROUP BY 1, 2";
// Per lot: the parts of the open holds in it (each hold probes its operation).
#define TALLY_HELD_PARTS(holds)                                                                                      \
  "SELECT h.tenant, h.account_id, (p->>0)::bigint, sum((p->>1)::bigint) FROM " holds                                 \
  " CROSS JOIN LATERAL (SELECT o.lots FROM operation o WHERE o.tenant = h.tenant AND o.account_id = h.account_id "   \
  "  AND o.biz_type = 'hold' AND o.biz_id = h.hold_id AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o " \
  "CROSS JOIN LATERAL jsonb_array_elements(o.lots) p GROUP BY 1, 2, 3"
constexpr std::string_view sql_held_parts =
    TALLY_HELD_PARTS(TALLY_CHECKED_ACCOUNTS
                     "CROSS JOIN LATERAL (SELECT * FROM hold h WHERE h.tenant = k.tenant "
                     "AND h.account_id = k.account_id AND h.state = 'held' OFFSET 0) h");
// The open holds of the scope ($1: a tenant, NULL: every tenant) and their
// parts: few at any time (the hold_open index), so read whole.
constexpr std::string_view sql_scope_open_holds =
    "SELECT tenant, account_id, sum(amount) FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1) "
    "GROUP BY tenant, account_id";
constexpr std::string_view sql_scope_held_parts =
    TALLY_HELD_PARTS("(SELECT * FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1)) h");
#undef TALLY_HELD_PARTS
// Per account and lot, its expire entries (a lot's biz_id: its id).
constexpr std::string_view sql_expire_entries =
    "SELECT k.tenant, k.account_id, e.biz_id, count(*) FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT biz_id FROM ledger_entry e WHERE e.tenant = k.tenant "
    "  AND e.account_id = k.account_id AND e.biz_type = 'expire' OFFSET 0) e GROUP BY 1, 2, 3";
// Operations whose lot parts do not add up to their ledger entry: over the
// entries after each checkpoint when $3, else over every entry, each
// probing its operation by key.
constexpr std::string_view sql_allocations =
    "SELECT k.tenant, k.account_id, o.biz_type, o.biz_id, s.total, e.delta FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT e.seq, e.biz_type, e.biz_id, e.delta FROM ledger_entry e "
    "  WHERE e.tenant = k.tenant AND e.account_id = k.account_id AND e.seq > CASE WHEN $3 THEN coalesce(("
    "   SELECT c.seq FROM account_checkpoint c WHERE c.tenant = k.tenant AND c.account_id = k.account_id), 0) "
    "   ELSE 0 END OFFSET 0) e "
    "CROSS JOIN LATERAL (SELECT o.biz_type, o.biz_id, o.lots FROM operation o "
    "  WHERE o.tenant = k.tenant AND o.account_id = k.account_id AND o.biz_type = e.biz_type AND o.biz_id = e.biz_id "
    "  AND o.ledger_seq = e.seq AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o "
    "CROSS JOIN LATERAL (SELECT sum((p->>1)::bigint) AS total FROM jsonb_array_elements(o.lots) p) s "
    "WHERE s.total <> abs(e.delta)";
#undef TALLY_CHECKED_ACCOUNTS
constexpr std::string_view sql_account_entries_upto =
    "SELECT seq, biz_type, biz_id, delta, reverses FROM ledger_entry "
    "WHERE tenant = $1 AND account_id = $2 AND seq <= $3 ORDER BY seq";
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

account_key account_of(const pg::result& r, int row) {
  return {std::string(r.text(row, 0)), std::string(r.text(row, 1))};
}

using lot_key = std::tuple<std::string, std::string, std::int64_t>;  // (tenant, account id, lot id)

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

// The lot_mismatch findings per account: each lot beside what the
// operations naming it add up to (when read) and the open holds' parts in
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

// Each account's checkpoint before the check.
std::map<account_key, checkpoint> checkpoints_before(const run_reads& in) {
  std::map<account_key, checkpoint> out;
  if (!in.checkpoints_in_ledger) {
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
  const auto ledger = keyed_by_account(in.ledger);
  const auto open_holds = keyed_by_account(in.open_holds);
  const auto before = checkpoints_before(in);
  const auto& totals = in.accounts;
  out.accounts = totals.rows();
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
      out.checkpoints.add(key, next);
    if (agrees) continue;
    // Only accounts that differ are read entry by entry for classification.
    pg::result entries;
    std::vector<pg::param> params{key.first, key.second, std::to_string(w)};
    if (auto err = co_await conn.async_exec(sql_account_entries_upto, std::move(params), entries, timeout))
      co_return err;
    std::vector<entry_view> views;
    for (int k = 0; k < entries.rows(); ++k)
      views.push_back({entries.int64(k, 0), std::string(entries.text(k, 1)), std::string(entries.text(k, 2)),
                       entries.int64(k, 3), entries.opt_int64(k, 4)});
    out.differing.push_back(reconcile_account(key.first, key.second, snapshot, after, held, open_held, views,
                                              lots_agree ? std::vector<finding>{} : std::move(lots->second)));
  }
  co_return pg::error{};
}

}  // namespace tally::shard
