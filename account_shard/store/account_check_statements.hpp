#pragma once
// What a check of accounts reads (account_check.cpp), and the same reads
// over a whole scope in a full reconciliation (reconciliation.cpp): for
// each result of run_reads, the statement of a check, that of a full run
// (sql_reconcile_*, sql_scope_*), and the enum naming the columns both
// return, in select order (a macro writes them once where both select
// them alike).
//
// Reconciliation reads each table on its own, or probes another by key from
// a LATERAL subquery (OFFSET 0 keeps it from being merged into a join, so
// the probe is the only way in), and joins the rows in memory by key. A
// join in SQL would leave the run to the planner's statistics, which crash
// recovery leaves stale until the next analyse: after a chaos run's
// restarts, the open holds' parts joined in SQL ran on the CPU past the
// 5 s statement time-out (0.2 ms once the tables were analysed).
//
// A full run's statements take the tenant ($1, NULL: every tenant). A
// check's take the accounts as $1 (tenants) and $2 (account ids) and probe
// each table by key from a LATERAL subquery that OFFSET 0 keeps from being
// merged into a join: the probe is the only plan, whatever the statistics
// say (crash recovery leaves them stale until the next analyse).
#include <string_view>

namespace tally::shard::check_sql {

#define TALLY_CHECKED_ACCOUNTS " unnest($1::text[], $2::text[]) AS k(tenant, account_id) "
// Both statements' columns, of `account a`.
#define TALLY_ACCOUNT_CHECK_COLUMNS "SELECT a.tenant, a.account_id, a.balance, a.held FROM"
inline constexpr std::string_view sql_accounts = TALLY_ACCOUNT_CHECK_COLUMNS TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT tenant, account_id, balance, held FROM account a "
    "  WHERE a.tenant = k.tenant AND a.account_id = k.account_id OFFSET 0) a";
inline constexpr std::string_view sql_reconcile_accounts =
    TALLY_ACCOUNT_CHECK_COLUMNS " account a WHERE $1::text IS NULL OR a.tenant = $1 ORDER BY a.tenant, a.account_id";
#undef TALLY_ACCOUNT_CHECK_COLUMNS
enum class account_col { tenant, account_id, balance, held };  // in select order

// Per account: Σ entries up to the watermark $3 and after it, whether it
// has an opening entry, how many entries repeat a business key, its last
// entry up to the watermark; then its checkpoint (NULL: none). From the
// checkpoint when $4 (its sum plus the entries after it; an account clean
// once had its opening entry), else from the first entry.
inline constexpr std::string_view sql_ledger =
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
// Per account: Σ entries up to the watermark $2 and after it, whether it
// has an opening entry, how many entries repeat a business key, and its
// last entry up to the watermark.
inline constexpr std::string_view sql_reconcile_ledger =
    "SELECT tenant, account_id, coalesce(sum(delta) FILTER (WHERE seq <= $2), 0), "
    "coalesce(sum(delta) FILTER (WHERE seq > $2), 0), bool_or(biz_type = 'open_account'), "
    "count(*) - count(DISTINCT (biz_type, biz_id)), coalesce(max(seq) FILTER (WHERE seq <= $2), 0) "
    "FROM ledger_entry WHERE $1::text IS NULL OR tenant = $1 GROUP BY tenant, account_id";
// In select order; sql_reconcile_ledger's rows end at last_seq.
enum class ledger_col {
  tenant,
  account_id,
  upto,
  after,
  opening,
  dups,
  last_seq,
  checkpoint_seq,
  checkpoint_balance,
  checkpoint_clean
};

inline constexpr std::string_view sql_reconcile_checkpoints =
    "SELECT tenant, account_id, seq, balance, clean FROM account_checkpoint WHERE $1::text IS NULL OR tenant = $1";
enum class checkpoint_col { tenant, account_id, seq, balance, clean };  // in select order

inline constexpr std::string_view sql_open_holds =
    "SELECT k.tenant, k.account_id, sum(h.amount) FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT amount FROM hold h WHERE h.tenant = k.tenant AND h.account_id = k.account_id "
    "  AND h.state = 'held' OFFSET 0) h GROUP BY 1, 2";
// The open holds of the scope ($1: a tenant, NULL: every tenant), and
// below their parts: few at any time (the hold_open index), so read whole.
inline constexpr std::string_view sql_scope_open_holds =
    "SELECT tenant, account_id, sum(amount) FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1) "
    "GROUP BY tenant, account_id";
enum class open_hold_col { tenant, account_id, held };  // in select order

// Both statements' columns, of `lot l`.
#define TALLY_LOT_CHECK_COLUMNS \
  "SELECT l.tenant, l.account_id, l.lot_id, l.remaining, l.held, l.expired, l.state = 'expired' "
// Every lot when $3, else the lots that hold value (open, or expired with a
// held part left).
inline constexpr std::string_view sql_lots = TALLY_LOT_CHECK_COLUMNS
    "FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT * FROM lot l WHERE l.tenant = k.tenant AND l.account_id = k.account_id "
    "  AND ($3 OR l.state = 'open' OR l.remaining > 0) OFFSET 0) l";
inline constexpr std::string_view sql_reconcile_lots = TALLY_LOT_CHECK_COLUMNS
    "FROM lot l WHERE $1::text IS NULL OR l.tenant = $1 ORDER BY l.tenant, l.account_id, l.lot_id";
#undef TALLY_LOT_CHECK_COLUMNS
enum class lot_col { tenant, account_id, lot_id, remaining, held, expired, is_expired };  // in select order

// Per lot: what the operations naming it add up to (granted and returned
// minus taken), and what the expire operations took from it; both
// statements' sums over an operation `o`'s lot parts `p`.
#define TALLY_LOT_PART_SUMS                                                                 \
  "(p->>0)::bigint, "                                                                       \
  "sum(CASE WHEN o.biz_type IN ('credit', 'refund', 'lot_migration') THEN (p->>1)::bigint " \
  "  WHEN o.biz_type = 'hold' THEN 0 ELSE -(p->>1)::bigint END), "                          \
  "coalesce(sum((p->>1)::bigint) FILTER (WHERE o.biz_type = 'expire'), 0) "
inline constexpr std::string_view sql_lot_parts =
    "SELECT k.tenant, k.account_id, " TALLY_LOT_PART_SUMS "FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT o.biz_type, o.lots FROM operation o WHERE o.tenant = k.tenant "
    "  AND o.account_id = k.account_id AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o "
    "CROSS JOIN LATERAL jsonb_array_elements(o.lots) p GROUP BY 1, 2, 3";
inline constexpr std::string_view sql_reconcile_lot_parts =
    "SELECT o.tenant, o.account_id, " TALLY_LOT_PART_SUMS
    "FROM operation o CROSS JOIN LATERAL jsonb_array_elements(o.lots) p "
    "WHERE o.state = 'succeeded' AND o.lots IS NOT NULL AND ($1::text IS NULL OR o.tenant = $1) GROUP BY 1, 2, 3";
#undef TALLY_LOT_PART_SUMS
// In select order: what the operations add up to, what the expire ones took.
enum class lot_part_col { tenant, account_id, lot_id, ops_remaining, expired_by_ops };

// Per lot: the parts of the open holds in it (each hold probes its operation).
#define TALLY_HELD_PARTS(holds)                                                                                      \
  "SELECT h.tenant, h.account_id, (p->>0)::bigint, sum((p->>1)::bigint) FROM " holds                                 \
  " CROSS JOIN LATERAL (SELECT o.lots FROM operation o WHERE o.tenant = h.tenant AND o.account_id = h.account_id "   \
  "  AND o.biz_type = 'hold' AND o.biz_id = h.hold_id AND o.state = 'succeeded' AND o.lots IS NOT NULL OFFSET 0) o " \
  "CROSS JOIN LATERAL jsonb_array_elements(o.lots) p GROUP BY 1, 2, 3"
inline constexpr std::string_view sql_held_parts =
    TALLY_HELD_PARTS(TALLY_CHECKED_ACCOUNTS
                     "CROSS JOIN LATERAL (SELECT * FROM hold h WHERE h.tenant = k.tenant "
                     "AND h.account_id = k.account_id AND h.state = 'held' OFFSET 0) h");
inline constexpr std::string_view sql_scope_held_parts =
    TALLY_HELD_PARTS("(SELECT * FROM hold WHERE state = 'held' AND ($1::text IS NULL OR tenant = $1)) h");
#undef TALLY_HELD_PARTS
enum class held_part_col { tenant, account_id, lot_id, held };  // in select order

// Per account and lot, its expire entries (a lot's biz_id: its id).
inline constexpr std::string_view sql_expire_entries =
    "SELECT k.tenant, k.account_id, e.biz_id, count(*) FROM" TALLY_CHECKED_ACCOUNTS
    "CROSS JOIN LATERAL (SELECT biz_id FROM ledger_entry e WHERE e.tenant = k.tenant "
    "  AND e.account_id = k.account_id AND e.biz_type = 'expire' OFFSET 0) e GROUP BY 1, 2, 3";
inline constexpr std::string_view sql_reconcile_expire_entries =
    "SELECT tenant, account_id, biz_id, count(*) FROM ledger_entry WHERE biz_type = 'expire' "
    "AND ($1::text IS NULL OR tenant = $1) GROUP BY 1, 2, 3";
enum class expire_entry_col { tenant, account_id, biz_id, entries };  // in select order

// Operations whose lot parts do not add up to their ledger entry: over the
// entries after each checkpoint when $3, else over every entry, each
// probing its operation by key.
inline constexpr std::string_view sql_allocations =
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
// Operations whose lot parts do not add up to their ledger entry (each
// probes its entry by sequence number).
inline constexpr std::string_view sql_reconcile_allocations =
    "SELECT o.tenant, o.account_id, o.biz_type, o.biz_id, s.total, e.delta FROM operation o "
    "CROSS JOIN LATERAL (SELECT e.delta FROM ledger_entry e WHERE e.seq = o.ledger_seq OFFSET 0) e "
    "CROSS JOIN LATERAL (SELECT sum((p->>1)::bigint) AS total FROM jsonb_array_elements(o.lots) p) s "
    "WHERE o.lots IS NOT NULL AND o.state = 'succeeded' AND ($1::text IS NULL OR o.tenant = $1) "
    "AND s.total <> abs(e.delta)";
enum class allocation_col { tenant, account_id, biz_type, biz_id, total, delta };  // in select order

}  // namespace tally::shard::check_sql
