#include "account_shard/store/queries.hpp"

#include <utility>
#include <vector>

#include "account_shard/store/batch_statements.hpp"
#include "account_shard/store/fence.hpp"
#include "account_shard/store/operation_columns.hpp"
#include "common/contract/account_document.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"
#include "common/projection/next_expiry.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::shard {

namespace asio = boost::asio;

namespace {

// An account's columns, with its next expiry; account_col names them in select order.
#define TALLY_ACCOUNT_SELECT                                                \
  "SELECT a.tenant, a.account_id, a.balance, a.held, a.status, a.version, " \
  "floor(extract(epoch FROM a.updated_at) * 1000)::bigint, "                \
  "nx.next_expiry_ms, nx.next_expiry_amount "                               \
  "FROM account a" TALLY_NEXT_EXPIRY_JOIN
enum class account_col {
  tenant,
  account_id,
  balance,
  held,
  status,
  version,
  updated_ms,
  next_expiry_ms,
  next_expiry_amount
};
constexpr std::string_view sql_account = TALLY_ACCOUNT_SELECT "WHERE a.tenant = $1 AND a.account_id = $2";
// Read again by a later statement, whose snapshot is taken after the lock
// was granted, the account shows every change committed before it.
constexpr std::string_view sql_lock_account = "SELECT 1 FROM account WHERE tenant = $1 AND account_id = $2 FOR UPDATE";
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
enum class lot_col {  // in select order
  lot_id,
  granted,
  remaining,
  held,
  expired,
  expires_ms,
  rule_version,
  state,
  origin,
  grace_ms,
  created_at
};
// A frozen account's lots wait until it is unfrozen (its writes are refused).
constexpr std::string_view sql_due_lots =
    "SELECT l.tenant, l.account_id, l.lot_id FROM lot l JOIN account a USING (tenant, account_id) "
    "WHERE l.state = 'open' AND a.status = 'active' "
    "AND l.expires_at <= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond' ORDER BY l.expires_at LIMIT $2";
enum class due_lot_col { tenant, account_id, lot_id };  // in select order
constexpr std::string_view sql_entries =
    "SELECT seq, biz_type, biz_id, delta, balance_after, reverses, "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
    "FROM ledger_entry WHERE tenant = $1 AND account_id = $2 AND seq > $3 ORDER BY seq LIMIT $4";
enum class entry_col { seq, biz_type, biz_id, delta, balance_after, reverses, created_at };  // in select order
constexpr std::string_view sql_holds =
    "SELECT hold_id, amount, captured, state, "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') "
    "FROM hold WHERE tenant = $1 AND account_id = $2 ORDER BY created_at, hold_id";
enum class hold_col { hold_id, amount, captured, state, created_at };  // in select order
constexpr std::string_view sql_old_holds =
    "SELECT tenant, account_id, hold_id, amount, "
    "(extract(epoch FROM now() - created_at) * 1000)::bigint FROM hold "
    "WHERE state = 'held' AND created_at < now() - make_interval(secs => $1::bigint / 1000.0) "
    "ORDER BY created_at LIMIT $2";
enum class old_hold_col { tenant, account_id, hold_id, amount, age_ms };  // in select order
constexpr std::string_view sql_operation =
    "SELECT " TALLY_OPERATION_COLUMNS
    "FROM operation o WHERE o.tenant = $1 AND o.account_id = $2 AND o.biz_type = $3 AND o.biz_id = $4";
constexpr std::string_view sql_outbox_backlog =
    "WITH c AS (SELECT coalesce((SELECT tx_id FROM relay_cursor WHERE consumer = 'projection'), '0'::xid8) AS tx_id, "
    "  coalesce((SELECT id FROM relay_cursor WHERE consumer = 'projection'), 0) AS id) "
    "SELECT count(*), coalesce((extract(epoch FROM now() - min(o.created_at)) * 1000)::bigint, 0) "
    "FROM outbox_event o, c WHERE (o.tx_id, o.id) > (c.tx_id, c.id)";
enum class backlog_col { undelivered, oldest_age_ms };  // in select order
constexpr std::string_view sql_accounts_by_status =
    TALLY_ACCOUNT_SELECT "WHERE a.tenant = $1 AND a.status = $2 ORDER BY a.account_id LIMIT $3";
// The row is locked (sql_lock_account); the version is the one the event carries.
constexpr std::string_view sql_set_status =
    "UPDATE account SET status = $3, version = $4, updated_at = now() WHERE tenant = $1 AND account_id = $2";

contract::account_document account_of(const pg::row<account_col>& r) {
  using c = account_col;
  return {std::string(r.text(c::tenant)),
          std::string(r.text(c::account_id)),
          r.int64(c::balance),
          r.int64(c::held),
          std::string(r.text(c::status)),
          r.int64(c::version),
          r.opt_int64(c::next_expiry_ms),
          r.opt_int64(c::next_expiry_amount).value_or(0)};
}

nlohmann::json account_json(const pg::row<account_col>& r) {
  return contract::internal_json(account_of(r), r.int64(account_col::updated_ms));
}

// An operator's status change: none to the status the account has, and none
// of a closed account.
bool changes_status(std::string_view from, std::string_view to) {
  return from != to && from != to_string(account_status::closed);
}

nlohmann::json hold_json(const pg::row<hold_col>& r) {
  using c = hold_col;
  return {{"hold_id", r.text(c::hold_id)},
          {"amount", r.int64(c::amount)},
          {"captured", r.int64(c::captured)},
          {"state", r.text(c::state)},
          {"created_at", r.text(c::created_at)}};
}

nlohmann::json old_hold_json(const pg::row<old_hold_col>& r) {
  using c = old_hold_col;
  return {{"tenant", r.text(c::tenant)},
          {"account_id", r.text(c::account_id)},
          {"hold_id", r.text(c::hold_id)},
          {"amount", r.int64(c::amount)},
          {"age_ms", r.int64(c::age_ms)}};
}

}  // namespace

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
  if (out.found) out.body = account_json({r[0], 0});
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
  using c = entry_col;
  for (auto row : pg::rows_of<c>(r)) {
    nlohmann::json e = {{"seq", row.int64(c::seq)},
                        {"biz_type", row.text(c::biz_type)},
                        {"biz_id", row.text(c::biz_id)},
                        {"delta", row.int64(c::delta)},
                        {"balance_after", row.int64(c::balance_after)},
                        {"created_at", row.text(c::created_at)}};
    if (!row.is_null(c::reverses)) e["reverses"] = row.int64(c::reverses);
    entries.push_back(std::move(e));
  }
  bool more = r.rows() == limit;
  out.body = {{"entries", std::move(entries)},
              {"next", more ? nlohmann::json(std::to_string(pg::row<c>(r, r.rows() - 1).int64(c::seq)))
                            : nlohmann::json(nullptr)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_holds(std::string tenant, std::string account_id) {
  pg::statement st{sql_holds, {tenant, account_id}};
  co_return co_await async_list<hold_col>(std::move(st), "holds", hold_json);
}

asio::awaitable<query_result> queries::async_old_holds(std::int64_t older_than_ms, int limit) {
  pg::statement st{sql_old_holds, {std::to_string(older_than_ms), std::to_string(limit)}};
  co_return co_await async_list<old_hold_col>(std::move(st), "holds", old_hold_json);
}

asio::awaitable<query_result> queries::async_operation(std::string tenant, std::string account_id, std::string biz_type,
                                                       std::string biz_id) {
  query_result out;
  std::vector<pg::statement> st{{sql_operation, {tenant, account_id, biz_type, biz_id}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.found = rs[0].rows() == 1;
  if (!out.found) co_return out;
  using c = operation_column;
  const pg::row<c> r(rs[0], 0);
  out.body = {{"tenant", tenant},
              {"account_id", account_id},
              {"biz_type", biz_type},
              {"biz_id", biz_id},
              {"state", r.text(c::state)},
              {"amount", r.int64(c::amount)},
              {"balance_after", r.int64(c::balance_after)},
              {"held_after", r.int64(c::held_after)},
              {"version", r.int64(c::version_after)},
              {"refunded", r.int64(c::refunded)},
              {"request_hash", r.text(c::request_hash)}};
  out.body["code"] = r.is_null(c::reason) ? nlohmann::json(nullptr) : nlohmann::json(r.text(c::reason));
  out.body["ledger_seq"] = r.is_null(c::ledger_seq) ? nlohmann::json(nullptr) : nlohmann::json(r.int64(c::ledger_seq));
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
  using c = lot_col;
  for (auto row : pg::rows_of<c>(r)) {
    auto expires = row.opt_int64(c::expires_ms);
    nlohmann::json l = {{"lot_id", row.int64(c::lot_id)},
                        {"granted", row.int64(c::granted)},
                        {"remaining", row.int64(c::remaining)},
                        {"held", row.int64(c::held)},
                        {"expired", row.int64(c::expired)},
                        {"expires_at", expires ? nlohmann::json(time::rfc3339_ms(*expires)) : nlohmann::json()},
                        {"rule_version", row.text(c::rule_version)},
                        {"state", row.text(c::state)},
                        {"origin", row.text(c::origin)},
                        {"created_at", row.text(c::created_at)}};
    if (auto grace = row.opt_int64(c::grace_ms)) l["grace_ms"] = *grace;
    lots.push_back(std::move(l));
  }
  // As the entries' cursor: the last id of a full page, as a string.
  nlohmann::json next = nullptr;
  if (r.rows() == page.limit) next = std::to_string(pg::row<c>(r, r.rows() - 1).int64(c::lot_id));
  out.body = {{"lots", std::move(lots)}, {"next", std::move(next)}};
  co_return out;
}

asio::awaitable<query_result> queries::async_due_lots(std::int64_t now_ms, int limit) {
  pg::statement st{sql_due_lots, {std::to_string(now_ms), std::to_string(limit)}};
  co_return co_await async_rows<due_lot_col>(std::move(st), [](const pg::row<due_lot_col>& row) -> nlohmann::json {
    using c = due_lot_col;
    return {row.text(c::tenant), row.text(c::account_id), row.int64(c::lot_id)};
  });
}

asio::awaitable<query_result> queries::async_outbox_backlog() {
  query_result out;
  std::vector<pg::statement> st{{sql_outbox_backlog, {}}};
  std::vector<pg::result> r;
  if ((out.error = co_await async_read(st, r))) co_return out;
  out.found = true;
  const pg::row<backlog_col> row(r[0], 0);
  out.body = {{"undelivered", row.int64(backlog_col::undelivered)},
              {"oldest_undelivered_age_ms", row.int64(backlog_col::oldest_age_ms)}};
  co_return out;
}

asio::awaitable<pg::error> queries::async_fenced_write(std::vector<pg::statement> writes, std::int64_t writer_epoch,
                                                       std::vector<pg::result>& out, then_writes then) {
  pg::lease conn;
  if (auto err = co_await writers_.async_acquire(conn)) co_return err;
  std::vector<pg::statement> st{{pg::sql_begin, {}}, {sql_fence_shared, {}}, {sql_read_epoch, {}}};
  for (auto& w : writes) st.push_back(std::move(w));
  std::vector<pg::result> rs;
  auto err = co_await conn->async_pipeline(st, rs, timeout_);
  if (!err && pg::row<epoch_col>(rs[2], 0).int64(epoch_col::epoch) != writer_epoch)
    err = pg::error{make_error_code(pg::errc::fenced), "", "another writer took over this shard"};
  std::vector<pg::statement> more;
  if (!err) {
    rs.erase(rs.begin(), rs.begin() + 3);
    if (then) more = then(rs);
  }
  if (!more.empty()) {
    std::vector<pg::result> more_rs;
    err = co_await conn->async_pipeline(more, more_rs, timeout_);
    for (auto& r : more_rs) rs.push_back(std::move(r));
  }
  if (err) {
    co_await pg::async_rollback(*conn, timeout_);
    co_return err;
  }
  pg::result ignored;
  if ((err = co_await conn->async_exec(pg::sql_commit, ignored, timeout_))) co_return err;
  out = std::move(rs);
  co_return pg::error{};
}

asio::awaitable<query_result> queries::async_set_status(std::string tenant, std::string account_id, std::string status,
                                                        std::int64_t writer_epoch) {
  query_result out;
  // Decided here from the locked row, so that the event carries the
  // contract's document as every other account event does.
  then_writes change = [&](std::span<const pg::result> locked) -> std::vector<pg::statement> {
    if (locked[1].rows() != 1) return {};
    auto doc = account_of({locked[1], 0});
    if (!changes_status(doc.status, status)) return {};
    doc.status = status;
    doc.version += 1;
    const std::vector<event_row> event{
        {doc.tenant, doc.account_id, doc.version, "account." + status, contract::event_payload(doc).dump()}};
    return {{sql_set_status, {tenant, account_id, status, std::to_string(doc.version)}},
            {batch_sql::sql_insert_events, pg::arrays_of(event, batch_sql::event_columns)},
            {sql_account, {tenant, account_id}}};
  };
  // Named: GCC 12 miscompiles a braced temporary in a co_await operand.
  std::vector<pg::statement> lock{{sql_lock_account, {tenant, account_id}}, {sql_account, {tenant, account_id}}};
  std::vector<pg::result> rs;
  out.error = co_await async_fenced_write(std::move(lock), writer_epoch, rs, std::move(change));
  if (out.error) co_return out;
  // The account as the change left it, or as it was when nothing changed.
  const auto& account = rs.back();
  out.found = account.rows() == 1;
  if (out.found) out.body = account_json({account, 0});
  co_return out;
}

asio::awaitable<query_result> queries::async_accounts_by_status(std::string tenant, std::string status, int limit) {
  pg::statement st{sql_accounts_by_status, {tenant, status, std::to_string(limit)}};
  co_return co_await async_list<account_col>(std::move(st), "accounts", account_json);
}

}  // namespace tally::shard
