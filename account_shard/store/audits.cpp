// Full audits (migration 0010): every account of a scope checked from its
// first entry, a page at a time, each page in a snapshot of its own
// (store/account_check.hpp), its progress committed with the checkpoints
// it leaves.
#include <utility>
#include <vector>

#include "account_shard/store/account_check.hpp"
#include "account_shard/store/queries.hpp"
#include "common/pg/rows.hpp"
#include "common/pg/transaction.hpp"

namespace tally::shard {

namespace asio = boost::asio;

namespace {

// The reports of at most this many differing accounts are kept per audit
// (every difference is counted).
constexpr int kept_findings = 1000;

#define TALLY_AUDIT_COLUMNS                                                                                     \
  "audit_id, tenant, state, freezes, accounts_total, accounts_checked, differences, classes::text, "            \
  "findings::text, frozen::text, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), " \
  "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "                               \
  "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), cursor_tenant, cursor_account"
enum class audit_col {  // in select order
  id,
  tenant,
  state,
  freeze,
  total,
  checked,
  differences,
  classes,
  findings,
  frozen,
  started,
  updated,
  finished,
  cursor_tenant,
  cursor_account
};

constexpr std::string_view sql_start =
    "INSERT INTO audit_run (tenant, state, freezes, accounts_total) "
    "SELECT $1, 'running', $2, count(*) FROM account WHERE $1::text IS NULL OR tenant = $1 "
    "RETURNING " TALLY_AUDIT_COLUMNS;
constexpr std::string_view sql_audit =
    "SELECT " TALLY_AUDIT_COLUMNS " FROM audit_run WHERE audit_id = $1 AND ($2::text IS NULL OR tenant = $2)";
constexpr std::string_view sql_audits = "SELECT " TALLY_AUDIT_COLUMNS
                                        " FROM audit_run WHERE tenant IS NOT DISTINCT FROM $1 "
                                        "ORDER BY audit_id DESC LIMIT $2";
constexpr std::string_view sql_cancel =
    "UPDATE audit_run SET state = 'cancelled', updated_at = now(), finished_at = now() "
    "WHERE audit_id = $1 AND ($2::text IS NULL OR tenant = $2) AND state = 'running'";
constexpr std::string_view sql_running = "SELECT audit_id FROM audit_run WHERE state = 'running' ORDER BY audit_id";
enum class running_col { audit_id };
// The next page of the scope's accounts after the cursor, by the primary key.
constexpr std::string_view sql_page =
    "SELECT tenant, account_id FROM account WHERE ($1::text IS NULL OR tenant = $1) "
    "AND ($2::text IS NULL OR (tenant, account_id) > ($2, $3)) ORDER BY tenant, account_id LIMIT $4";
enum class page_col { tenant, account_id };  // in select order
// A page's progress; the audit completes with its last page (unless it was
// cancelled meanwhile: the page still counts).
constexpr std::string_view sql_progress =
    "UPDATE audit_run SET cursor_tenant = coalesce($2, cursor_tenant), cursor_account = coalesce($3, cursor_account), "
    "accounts_checked = accounts_checked + $4, "
    "differences = differences + $5, classes = $6::jsonb, "
    "findings = findings || (SELECT coalesce(jsonb_agg(f), '[]') FROM (SELECT f FROM jsonb_array_elements($7::jsonb) f "
    "  LIMIT greatest(0, $8 - jsonb_array_length(findings))) x), "
    "frozen = frozen || $9::jsonb, updated_at = now(), "
    "state = CASE WHEN state = 'running' AND NOT $10 THEN 'completed' ELSE state END, "
    "finished_at = CASE WHEN state = 'running' AND NOT $10 THEN now() ELSE finished_at END "
    "WHERE audit_id = $1";

nlohmann::json audit_json(const pg::row<audit_col>& r) {
  using c = audit_col;
  const auto total = r.int64(c::total), checked = r.int64(c::checked);
  nlohmann::json j = {{"audit_id", r.int64(c::id)},
                      {"state", r.text(c::state)},
                      {"freeze", r.boolean(c::freeze)},
                      {"accounts_total", total},
                      {"accounts_checked", checked},
                      {"progress", total == 0 ? 1.0 : std::min(1.0, static_cast<double>(checked) / total)},
                      {"differences", r.int64(c::differences)},
                      {"classes", nlohmann::json::parse(r.text(c::classes))},
                      {"accounts_with_differences", nlohmann::json::parse(r.text(c::findings))},
                      {"frozen", nlohmann::json::parse(r.text(c::frozen))},
                      {"started_at", r.text(c::started)},
                      {"updated_at", r.text(c::updated)}};
  j["finished_at"] = r.is_null(c::finished) ? nlohmann::json(nullptr) : nlohmann::json(r.text(c::finished));
  return j;
}

// {class: n} plus another run's counts.
nlohmann::json add_counts(nlohmann::json sum, const nlohmann::json& more) {
  for (const auto& [k, v] : more.items()) sum[k] = sum.value(k, 0) + v.get<std::int64_t>();
  return sum;
}

}  // namespace

asio::awaitable<query_result> queries::async_audit_start(std::optional<std::string> tenant, bool freeze,
                                                         std::int64_t writer_epoch) {
  query_result out;
  std::vector<pg::statement> st{{sql_start, {tenant, freeze ? "true" : "false"}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_fenced_write(std::move(st), writer_epoch, rs))) co_return out;
  out.body = audit_json({rs[0], 0});
  co_return out;
}

asio::awaitable<query_result> queries::async_audit(std::int64_t audit_id, std::optional<std::string> tenant) {
  query_result out;
  std::vector<pg::statement> st{{sql_audit, {std::to_string(audit_id), tenant}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.found = rs[0].rows() == 1;
  if (out.found) out.body = audit_json({rs[0], 0});
  co_return out;
}

asio::awaitable<query_result> queries::async_audits(std::optional<std::string> tenant, int limit) {
  pg::statement st{sql_audits, {tenant, std::to_string(limit)}};
  co_return co_await async_list<audit_col>(std::move(st), "audits", audit_json);
}

asio::awaitable<query_result> queries::async_audit_cancel(std::int64_t audit_id, std::optional<std::string> tenant,
                                                          std::int64_t writer_epoch) {
  query_result out;
  const auto id = std::to_string(audit_id);
  std::vector<pg::statement> st{{sql_cancel, {id, tenant}}, {sql_audit, {id, tenant}}};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_fenced_write(std::move(st), writer_epoch, rs))) co_return out;
  out.found = rs[1].rows() == 1;
  if (out.found) out.body = audit_json({rs[1], 0});
  co_return out;
}

asio::awaitable<query_result> queries::async_running_audits() {
  pg::statement st{sql_running, {}};
  co_return co_await async_rows<running_col>(std::move(st), [](const pg::row<running_col>& row) -> nlohmann::json {
    return row.int64(running_col::audit_id);
  });
}

asio::awaitable<query_result> queries::async_audit_page(std::int64_t audit_id, int page, std::int64_t writer_epoch) {
  query_result out;
  check_result checked;
  account_set set;
  std::optional<std::string> tenant;
  bool freeze = false;
  nlohmann::json classes;
  std::int64_t w = 0;
  {
    pg::lease conn;
    if ((out.error = co_await readers_.async_acquire(conn))) co_return out;
    std::vector<pg::statement> start{
        {sql_check_snapshot, {}}, {sql_max_seq, {}}, {sql_audit, {std::to_string(audit_id), {}}}};
    std::vector<pg::result> rs;
    if ((out.error = co_await conn->async_pipeline(start, rs, timeout_))) co_return out;
    using c = audit_col;
    const pg::row<c> audit(rs[2], 0);
    if (rs[2].rows() != 1 || audit.text(c::state) != "running") {
      co_await pg::async_rollback(*conn, timeout_);
      out.body = {{"more", false}, {"accounts", 0}};
      co_return out;
    }
    w = pg::row<max_seq_col>(rs[1], 0).int64(max_seq_col::seq);
    if (!audit.is_null(c::tenant)) tenant = std::string(audit.text(c::tenant));
    freeze = audit.boolean(c::freeze);
    classes = nlohmann::json::parse(audit.text(c::classes));
    std::optional<std::string> after_tenant, after_account;
    if (!audit.is_null(c::cursor_tenant)) {
      after_tenant = std::string(audit.text(c::cursor_tenant));
      after_account = std::string(audit.text(c::cursor_account));
    }
    std::vector<pg::statement> next{{sql_page, {tenant, after_tenant, after_account, std::to_string(page)}}};
    if ((out.error = co_await conn->async_pipeline(next, rs, timeout_))) co_return out;
    for (auto row : pg::rows_of<page_col>(rs[0]))
      set.add(std::string(row.text(page_col::tenant)), std::string(row.text(page_col::account_id)));
    if (set.size() > 0) {
      auto st = check_statements(set, w, check_kind::whole_history, tenant);
      std::vector<pg::result> reads;
      if ((out.error = co_await conn->async_pipeline(st, reads, timeout_))) co_return out;
      const auto in = reads_of(std::move(reads), check_kind::whole_history);
      if ((out.error = co_await check_accounts(*conn, in, w, timeout_, checked))) co_return out;
    }
    co_await pg::async_rollback(*conn, timeout_);
  }
  auto frozen = co_await freeze_differing(checked.differing, freeze, writer_epoch);
  if ((out.error = frozen.error)) co_return out;
  const bool more = static_cast<int>(set.size()) == page;
  auto findings = nlohmann::json::array();
  for (const auto& d : checked.differing) findings.push_back(to_json(d));
  std::optional<std::string> cursor_tenant, cursor_account;
  if (set.size() > 0) {
    cursor_tenant = set.tenants.back();
    cursor_account = set.accounts.back();
  }
  std::vector<pg::statement> writes{
      checked.checkpoints.statement(),
      {sql_progress,
       {std::to_string(audit_id), cursor_tenant, cursor_account, std::to_string(set.size()),
        std::to_string(checked.differing.size()),
        add_counts(std::move(classes), class_counts(checked.differing)).dump(), findings.dump(),
        std::to_string(kept_findings), frozen.ids.dump(), more ? "true" : "false"}}};
  std::vector<pg::result> ignored;
  if ((out.error = co_await async_fenced_write(std::move(writes), writer_epoch, ignored))) co_return out;
  out.body = {{"more", more}, {"accounts", set.size()}};
  co_return out;
}

}  // namespace tally::shard
