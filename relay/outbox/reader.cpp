#include "relay/outbox/reader.hpp"

#include <nlohmann/json.hpp>

#include "common/contract/account_document.hpp"
#include "common/pg/rows.hpp"
#include "common/projection/next_expiry.hpp"

namespace tally::relay {

namespace asio = boost::asio;

namespace {

// The consumer's lock, and a session whose commits (the cursor's saves) do
// not wait for the WAL flush: a cursor lost to a server crash is an older
// one, from which the events since are delivered again, and every sink
// applies an event once however often it comes.
constexpr std::string_view sql_lock =
    "SELECT pg_try_advisory_lock(hashtextextended('tally.relay:' || $1, 0)),"
    " set_config('synchronous_commit', 'off', false)";
enum class lock_col { locked, synchronous_commit };  // in select order
// The server's timeline: the first 8 hex digits of the WAL segment being
// written. A promotion starts a new one; on a standby the call fails.
#define TALLY_TIMELINE "('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::int"
constexpr std::string_view sql_load = "SELECT c.tx_id::text, c.id, c.timeline, " TALLY_TIMELINE
                                      " FROM (SELECT) one LEFT JOIN relay_cursor c ON c.consumer = $1";
enum class load_col { tx_id, id, timeline, source_timeline };  // in select order
constexpr std::string_view sql_save =
    "INSERT INTO relay_cursor (consumer, tx_id, id, timeline) VALUES ($1, $2::xid8, $3, $4)"
    " ON CONFLICT (consumer) DO UPDATE"
    " SET tx_id = EXCLUDED.tx_id, id = EXCLUDED.id, timeline = EXCLUDED.timeline, updated_at = now()";
// The commit-safe horizon: every transaction of this database below it has
// ended. Kept in a session setting for the next statement, which runs on a
// later snapshot: a transaction that ended after this one looked has
// committed (or not) by then. Two ways to find one:
// - The scan: the oldest transaction still running in this database (each
//   holds the lock on its own id; pg_locks and pg_stat_activity's pid and
//   datname are readable by any role), else the first id not yet assigned.
//   Only this database counts, so a long transaction in another database
//   on the same server does not hold delivery back; but reading pg_locks
//   and pg_stat_activity costs the server about half a millisecond.
// - The snapshot's xmin: the oldest transaction running on the whole
//   server, nearly free. It also lies below every transaction of this
//   database still running, so it is safe too, and so is any horizon found
//   before ($1): transaction ids only grow. Only a long transaction in
//   another database holds it back, until the next scan.
constexpr std::string_view sql_horizon_scan =
    "WITH s AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax),"
    " r AS (SELECT l.transactionid::text::bigint AS x FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    "  WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND a.datname = current_database())"
    " SELECT set_config('tally.relay_horizon', (s.xmax - coalesce(max(d.delta), 0))::text, false), " TALLY_TIMELINE
    " FROM s LEFT JOIN LATERAL (SELECT ((s.xmax % 4294967296) - r.x + 4294967296) % 4294967296 AS delta FROM r) d"
    "  ON d.delta BETWEEN 1 AND 2147483648 GROUP BY s.xmax";
constexpr std::string_view sql_horizon_xmin =
    "SELECT set_config('tally.relay_horizon', greatest(pg_snapshot_xmin(pg_current_snapshot()), $1::xid8)::text,"
    " false), " TALLY_TIMELINE;
enum class horizon_col { horizon, timeline };  // of either, in select order
#undef TALLY_TIMELINE
// The events after a cursor below the horizon, then at most one row
// (without its payload) of an event after the cursor at or above it: that
// row says events are pending, committed or not, that the horizon has not
// passed yet. Both branches start in the (tx_id, id) index.
#define TALLY_HORIZON "current_setting('tally.relay_horizon')::xid8"
#define TALLY_OUTBOX_AFTER(object, version, settled)                                   \
  "(SELECT id, tx_id::text, event_id::text, tenant, " object ", " version              \
  ", event_type, payload::text,"                                                       \
  " floor(extract(epoch FROM created_at) * 1000)::bigint, " settled                    \
  " FROM outbox_event"                                                                 \
  " WHERE tx_id < " TALLY_HORIZON                                                      \
  " AND (tx_id, id) > ($1::xid8, $2::bigint) ORDER BY tx_id, id LIMIT $3)"             \
  " UNION ALL (SELECT id, tx_id::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL" \
  " FROM outbox_event WHERE (tx_id, id) > (greatest(" TALLY_HORIZON                    \
  ", $1::xid8),"                                                                       \
  " CASE WHEN " TALLY_HORIZON " > $1::xid8 THEN -1 ELSE $2::bigint END) ORDER BY tx_id, id LIMIT 1)"
// A saga's event settles it when its state is terminal: its projection expires.
#define TALLY_SAGA_SETTLED "payload->>'state' IN ('completed', 'failed', 'compensated')"
constexpr std::string_view sql_next_shard = TALLY_OUTBOX_AFTER("account_id", "aggregate_version", "false");
constexpr std::string_view sql_next_saga = TALLY_OUTBOX_AFTER("saga_id", "saga_version", TALLY_SAGA_SETTLED);
// In select order, of either.
enum class event_col { id, tx_id, event_id, tenant, object_id, version, type, payload, created_ms, settled };
#undef TALLY_HORIZON
#undef TALLY_OUTBOX_AFTER
constexpr std::string_view sql_accounts =
    "SELECT a.tenant, a.account_id, a.version, a.balance, a.held, a.status,"
    " floor(extract(epoch FROM a.updated_at) * 1000)::bigint, nx.next_expiry_ms, nx.next_expiry_amount"
    " FROM account a" TALLY_NEXT_EXPIRY_JOIN
    "WHERE (a.tenant, a.account_id) > ($1, $2) ORDER BY a.tenant, a.account_id LIMIT $3";
// In select order.
enum class account_col {
  tenant,
  account_id,
  version,
  balance,
  held,
  status,
  updated_ms,
  next_expiry_ms,
  next_expiry_amount
};
// A saga's document is the payload of its latest event still in the
// outbox; a saga whose events were all pruned is read through by the
// gateway, as any other missing projection.
constexpr std::string_view sql_sagas =
    "SELECT DISTINCT ON (saga_id) tenant, saga_id, saga_version, payload::text, " TALLY_SAGA_SETTLED
    ","
    " floor(extract(epoch FROM created_at) * 1000)::bigint FROM outbox_event"
    " WHERE saga_id > $1 ORDER BY saga_id, saga_version DESC LIMIT $2";
enum class saga_col { tenant, saga_id, version, payload, settled, updated_ms };  // in select order
#undef TALLY_SAGA_SETTLED

// An object's kind, key and version from its row (Column names tenant and
// version), `id` naming the column of its id.
template <class Column>
object_state object_of(object_kind kind, const pg::row<Column>& r, Column id) {
  object_state s;
  s.kind = kind;
  s.tenant = r.text(Column::tenant);
  s.object_id = r.text(id);
  s.version = r.int64(Column::version);
  return s;
}

object_state account_state(const pg::row<account_col>& r) {
  using c = account_col;
  auto s = object_of(object_kind::account, r, c::account_id);
  const contract::account_document doc{s.tenant,
                                       s.object_id,
                                       r.int64(c::balance),
                                       r.int64(c::held),
                                       std::string(r.text(c::status)),
                                       s.version,
                                       r.opt_int64(c::next_expiry_ms),
                                       r.opt_int64(c::next_expiry_amount).value_or(0)};
  s.doc = contract::public_json(doc, r.int64(c::updated_ms)).dump();
  return s;
}

object_state saga_state(const pg::row<saga_col>& r) {
  using c = saga_col;
  auto s = object_of(object_kind::saga, r, c::saga_id);
  s.doc = r.text(c::payload);
  s.settled = r.boolean(c::settled);
  s.updated_ms = r.int64(c::updated_ms);
  return s;
}

}  // namespace

bool source_history_changed(const saved_cursor& c) { return c.timeline && *c.timeline != c.source_timeline; }

outbox_reader::outbox_reader(asio::any_io_executor ex, source_config source, std::string consumer,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds horizon_scan)
    : source_(std::move(source)),
      consumer_(std::move(consumer)),
      timeout_(timeout),
      horizon_scan_(horizon_scan),
      conn_(std::move(ex)) {}

asio::awaitable<pg::error> outbox_reader::async_take_lock(bool& holder) {
  holder = false;
  if (!conn_.is_open()) {
    if (auto err = co_await conn_.async_connect(source_.conninfo, timeout_)) co_return err;
  }
  pg::result r;
  std::vector<pg::param> params{consumer_};
  auto err = co_await conn_.async_exec(sql_lock, std::move(params), r, timeout_);
  if (!err) holder = pg::row<lock_col>(r, 0).boolean(lock_col::locked);
  co_return err;
}

asio::awaitable<pg::error> outbox_reader::async_load_cursor(saved_cursor& out) {
  pg::result r;
  std::vector<pg::param> params{consumer_};
  auto err = co_await conn_.async_exec(sql_load, std::move(params), r, timeout_);
  if (err) co_return err;
  out = saved_cursor{};
  using c = load_col;
  const pg::row<c> row(r, 0);
  if (!row.is_null(c::tx_id)) out.at = cursor{std::string(row.text(c::tx_id)), row.int64(c::id)};
  if (!row.is_null(c::timeline)) out.timeline = static_cast<std::int32_t>(row.int64(c::timeline));
  out.source_timeline = static_cast<std::int32_t>(row.int64(c::source_timeline));
  co_return err;
}

asio::awaitable<pg::error> outbox_reader::async_ping() {
  pg::result r;
  co_return co_await conn_.async_exec("SELECT 1", r, timeout_);
}

asio::awaitable<pg::error> outbox_reader::async_save_cursor(const cursor& c, std::int32_t timeline) {
  pg::result r;
  std::vector<pg::param> params{consumer_, c.tx_id, std::to_string(c.id), std::to_string(timeline)};
  co_return co_await conn_.async_exec(sql_save, std::move(params), r, timeout_);
}

asio::awaitable<pg::error> outbox_reader::async_open() {
  if (conn_.is_open()) co_return pg::error{};
  co_return co_await conn_.async_connect(source_.conninfo, timeout_);
}

asio::awaitable<pg::error> outbox_reader::async_next(const cursor& from, std::size_t limit,
                                                     std::vector<outbox_event>& out) {
  std::vector<outbox_batch> batches;
  auto err = co_await async_read(std::span<const cursor>(&from, 1), limit, batches);
  out.clear();
  if (!err) out = std::move(batches[0].events);
  co_return err;
}

asio::awaitable<pg::error> outbox_reader::async_read(std::span<const cursor> from, std::size_t limit,
                                                     std::vector<outbox_batch>& out) {
  out.clear();
  const bool shard = source_.kind == source_kind::shard;
  const auto now = std::chrono::steady_clock::now();
  const bool scan = scanned_horizon_.empty() || now - scanned_at_ >= horizon_scan_;
  std::vector<pg::statement> statements;
  statements.reserve(from.size() + 1);
  if (scan)
    statements.push_back({sql_horizon_scan, {}});
  else
    statements.push_back({sql_horizon_xmin, {scanned_horizon_}});
  for (const auto& c : from)
    statements.push_back(
        {shard ? sql_next_shard : sql_next_saga, {c.tx_id, std::to_string(c.id), std::to_string(limit)}});
  std::vector<pg::result> results;
  auto err = co_await conn_.async_pipeline(statements, results, timeout_);
  if (err) co_return err;
  const pg::row<horizon_col> horizon(results[0], 0);
  if (scan) {
    scanned_horizon_ = horizon.text(horizon_col::horizon);
    scanned_at_ = now;
  }
  const auto timeline = static_cast<std::int32_t>(horizon.int64(horizon_col::timeline));
  const auto kind = shard ? object_kind::account : object_kind::saga;
  out.resize(from.size());
  for (std::size_t b = 0; b < from.size(); ++b) {
    const auto& r = results[b + 1];
    auto& batch = out[b];
    batch.timeline = timeline;
    batch.events.reserve(static_cast<std::size_t>(r.rows()));
    using c = event_col;
    for (auto row : pg::rows_of<c>(r)) {
      if (row.is_null(c::event_id)) {  // the marker of an event the horizon has not passed
        batch.pending = true;
        continue;
      }
      outbox_event e;
      e.id = row.int64(c::id);
      e.tx_id = row.text(c::tx_id);
      e.event_id = row.text(c::event_id);
      e.kind = kind;
      e.tenant = row.text(c::tenant);
      e.object_id = row.text(c::object_id);
      e.version = row.int64(c::version);
      e.type = row.text(c::type);
      e.created_ms = row.int64(c::created_ms);
      e.settled = row.boolean(c::settled);
      // A payload that is not an object still moves the cursor: it can never
      // become deliverable, and holding the line for it would stop the source.
      e.doc = public_doc(kind, row.text(c::payload), e.created_ms).value_or("");
      batch.events.push_back(std::move(e));
    }
  }
  co_return err;
}

asio::awaitable<pg::error> outbox_reader::async_snapshot(const object_state* after, std::size_t limit,
                                                         std::vector<object_state>& out) {
  out.clear();
  pg::result r;
  const bool shard = source_.kind == source_kind::shard;
  std::vector<pg::param> params;
  if (shard) params.emplace_back(after ? after->tenant : "");
  params.emplace_back(after ? after->object_id : "");
  params.emplace_back(std::to_string(limit));
  auto err = co_await conn_.async_exec(shard ? sql_accounts : sql_sagas, std::move(params), r, timeout_);
  if (err) co_return err;
  if (shard)
    for (auto row : pg::rows_of<account_col>(r)) out.push_back(account_state(row));
  else
    for (auto row : pg::rows_of<saga_col>(r)) out.push_back(saga_state(row));
  co_return err;
}

}  // namespace tally::relay
