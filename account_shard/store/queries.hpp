#pragma once
// Read-side queries and the operator's writes (freeze/unfreeze, the record
// of a reconciliation run) of a shard.
// Results come back as JSON text for the HTTP layer.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "account_shard/ledger/reconcile.hpp"
#include "common/contract/enum_names.hpp"
#include "common/pg/pool.hpp"
#include "common/pg/rows.hpp"

namespace tally::shard {

struct lot_page {
  bool all = false;        // every state, else open lots only
  std::int64_t after = 0;  // the last lot id of the previous page; 0: from the first
  int limit = 100;
};

struct query_result {
  pg::error error;
  bool found = true;
  nlohmann::json body;
  std::string refusal;  // not empty: the request was refused (400) for this reason, nothing read or written
};

// A full reconciliation reads every account of its scope; an incremental
// one the accounts written since the last run of its scope, each from its
// checkpoint (store/reconciliation.cpp).
TALLY_NAMED_ENUM(reconcile_mode, incremental, full);
constexpr std::optional<reconcile_mode> reconcile_mode_from(std::string_view s) {
  return contract::value_of(reconcile_mode_names, s);
}

struct reconcile_request {
  reconcile_mode mode = reconcile_mode::incremental;
  std::optional<std::int64_t> watermark;  // default: the newest entry
  bool freeze = true;                     // accounts with a difference are frozen
  std::optional<std::string> tenant;      // none: every tenant
};

class queries {
 public:
  queries(pg::pool& readers, pg::pool& writers, std::chrono::milliseconds timeout)
      : readers_(readers), writers_(writers), timeout_(timeout) {}

  boost::asio::awaitable<query_result> async_account(std::string tenant, std::string account_id);
  boost::asio::awaitable<query_result> async_entries(std::string tenant, std::string account_id, std::int64_t after,
                                                     int limit);
  boost::asio::awaitable<query_result> async_holds(std::string tenant, std::string account_id);
  // The account's lots in consumption order.
  boost::asio::awaitable<query_result> async_lots(std::string tenant, std::string account_id, lot_page page);
  // Open lots whose expiry has come by `now_ms`, earliest first: body [[tenant, account, lot_id], ...].
  boost::asio::awaitable<query_result> async_due_lots(std::int64_t now_ms, int limit);
  boost::asio::awaitable<query_result> async_operation(std::string tenant, std::string account_id, std::string biz_type,
                                                       std::string biz_id);
  boost::asio::awaitable<query_result> async_old_holds(std::int64_t older_than_ms, int limit);
  // Reconciles the accounts of the request's mode and scope at its
  // watermark in one snapshot, records the run and the checkpoints it
  // leaves (store/reconciliation.cpp). Refused: an incremental run at a
  // watermark below the last run's.
  boost::asio::awaitable<query_result> async_reconcile(reconcile_request request, std::int64_t writer_epoch);
  // Outbox events the relay's projection consumer has not delivered yet,
  // and the age of the oldest.
  boost::asio::awaitable<query_result> async_outbox_backlog();
  // Sets an account's status (active/frozen) with its outbox event, decided
  // from the locked row: nothing to the status it has, nor of a closed account.
  boost::asio::awaitable<query_result> async_set_status(std::string tenant, std::string account_id, std::string status,
                                                        std::int64_t writer_epoch);
  // A tenant's accounts in `status`, by id: {"accounts": [...]}.
  boost::asio::awaitable<query_result> async_accounts_by_status(std::string tenant, std::string status, int limit);
  // The last `limit` reconciliation runs of `tenant` (none: of every
  // tenant), newest first: {"reports": [...]}.
  boost::asio::awaitable<query_result> async_reconciliation_runs(std::optional<std::string> tenant, int limit);

  // ---- full audits (store/audits.cpp) ----
  // Records a running audit of `tenant`'s accounts (none: every tenant's);
  // body: the audit. The audit job pages it.
  boost::asio::awaitable<query_result> async_audit_start(std::optional<std::string> tenant, bool freeze,
                                                         std::int64_t writer_epoch);
  // One audit; not found when it is not `tenant`'s (when given).
  boost::asio::awaitable<query_result> async_audit(std::int64_t audit_id, std::optional<std::string> tenant);
  // The last `limit` audits of `tenant` (none: of every tenant), newest
  // first: {"audits": [...]}.
  boost::asio::awaitable<query_result> async_audits(std::optional<std::string> tenant, int limit);
  // Cancels a running audit (an ended one stays as it is); body: the audit.
  boost::asio::awaitable<query_result> async_audit_cancel(std::int64_t audit_id, std::optional<std::string> tenant,
                                                          std::int64_t writer_epoch);
  // The running audits' ids, oldest first: body [id, ...].
  boost::asio::awaitable<query_result> async_running_audits();
  // Checks the next `page` accounts of a running audit in one snapshot,
  // freezes those that differ when it says so, and commits its progress
  // with the checkpoints it leaves. body {"more": whether accounts are
  // left, "accounts": checked}.
  boost::asio::awaitable<query_result> async_audit_page(std::int64_t audit_id, int page, std::int64_t writer_epoch);

 private:
  boost::asio::awaitable<pg::error> async_read(std::span<const pg::statement> statements, std::vector<pg::result>& out);
  // One statement read, each row of it as `json_of` makes it: body
  // [row, ...], or {name: [row, ...]} with async_list.
  template <class Column, class JsonOf>
  boost::asio::awaitable<query_result> async_rows(pg::statement statement, JsonOf json_of);
  template <class Column, class JsonOf>
  boost::asio::awaitable<query_result> async_list(pg::statement statement, std::string_view name, JsonOf json_of);
  struct frozen_accounts {
    pg::error error;
    nlohmann::json accounts = nlohmann::json::array();  // [{tenant, account_id}]
    nlohmann::json ids = nlohmann::json::array();       // [account_id]
  };
  // With `freeze`, freezes each account whose difference needs it.
  boost::asio::awaitable<frozen_accounts> freeze_differing(const std::vector<account_reconciliation>& differing,
                                                           bool freeze, std::int64_t writer_epoch);
  // The statements to run after the first ones, made from their results.
  using then_writes = std::function<std::vector<pg::statement>(std::span<const pg::result>)>;
  // `writes` in one transaction on the writer pool, fenced: refused when
  // another writer took over (its epoch is not `writer_epoch`). With
  // `then`, the statements it makes of the writes' results (none: nothing
  // more) run next in the same transaction, one round trip more: a change
  // decided in C++ from the rows the writes locked. `out`: the results of
  // the writes, then of those.
  boost::asio::awaitable<pg::error> async_fenced_write(std::vector<pg::statement> writes, std::int64_t writer_epoch,
                                                       std::vector<pg::result>& out, then_writes then = {});

  pg::pool& readers_;
  pg::pool& writers_;
  std::chrono::milliseconds timeout_;
};

template <class Column, class JsonOf>
boost::asio::awaitable<query_result> queries::async_rows(pg::statement statement, JsonOf json_of) {
  query_result out;
  std::vector<pg::statement> st{std::move(statement)};
  std::vector<pg::result> rs;
  if ((out.error = co_await async_read(st, rs))) co_return out;
  out.body = nlohmann::json::array();
  for (auto row : pg::rows_of<Column>(rs[0])) out.body.push_back(json_of(row));
  co_return out;
}

template <class Column, class JsonOf>
boost::asio::awaitable<query_result> queries::async_list(pg::statement statement, std::string_view name,
                                                         JsonOf json_of) {
  auto out = co_await async_rows<Column>(std::move(statement), std::move(json_of));
  if (!out.error) out.body = {{name, std::move(out.body)}};
  co_return out;
}

}  // namespace tally::shard
