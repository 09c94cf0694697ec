#include "account_shard/store/queries.hpp"

#include <utility>
#include <vector>

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
constexpr std::string_view sql_outbox_backlog =
    "WITH c AS (SELECT coalesce((SELECT tx_id FROM relay_cursor WHERE consumer = 'projection'), '0'::xid8) AS tx_id, "
    "  coalesce((SELECT id FROM relay_cursor WHERE consumer = 'projection'), 0) AS id) "
    "SELECT count(*), coalesce((extract(epoch FROM now() - min(o.created_at)) * 1000)::bigint, 0) "
    "FROM outbox_event o, c WHERE (o.tx_id, o.id) > (c.tx_id, c.id)";
constexpr std::string_view sql_accounts_by_status =
    TALLY_ACCOUNT_SELECT "WHERE a.tenant = $1 AND a.status = $2 ORDER BY a.account_id LIMIT $3";
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

}  // namespace tally::shard
