#include "gateway/tallyctl/commands.hpp"

#include <array>

#include <CLI/CLI.hpp>

#include "gateway/tallyctl/render.hpp"

namespace tally::ctl {

namespace {

using nlohmann::json;

void no_options(CLI::App&, arguments&) {}

// ---- sagas ----

void declare_list(CLI::App& c, arguments& a) {
  auto& l = a.list;
  c.add_option("--state", l.state,
               "pending, running, awaiting_confirmation, compensating, completed, "
               "failed, compensated or needs_attention");
  c.add_option("--type", l.type, "credit, deduct, refund, transfer or batch_deduct");
  c.add_option("--biz-id", l.biz_id, "The business key");
  c.add_option("--account", l.account, "Naming this account (not a batch deduction's items)");
  c.add_option("--created-after", l.created_after, "Created at or after (RFC 3339, UTC)");
  c.add_option("--created-before", l.created_before, "Created before (RFC 3339, UTC)");
  c.add_option("--older-than-ms", l.older_than_ms, "Created at least this long ago");
  c.add_flag("--oldest-first", l.oldest_first, "Oldest first instead");
  c.add_flag("--overdue", l.overdue, "Only sagas past their deadline that have not finished");
  c.add_option("--limit", l.limit, "Sagas per page (1-500)")->check(CLI::Range(1, 500));
  c.add_option("--cursor", l.cursor, "The next page's cursor, from the previous page");
}

int run_list(const command_line& cl, const arguments& a) {
  const auto& l = a.list;
  return cl.get(target({"v1", "admin", "sagas"}, {{"state", l.state},
                                                  {"type", l.type},
                                                  {"biz_id", l.biz_id},
                                                  {"account", l.account},
                                                  {"created_after", l.created_after},
                                                  {"created_before", l.created_before},
                                                  {"older_than_ms", text(l.older_than_ms)},
                                                  {"order", l.oldest_first ? "oldest" : ""},
                                                  {"overdue", l.overdue ? "true" : ""},
                                                  {"limit", text(l.limit)},
                                                  {"cursor", l.cursor}}),
                sagas_list);
}

int run_counts(const command_line& cl, const arguments&) {
  return cl.get(target({"v1", "admin", "sagas", "counts"}), saga_counts);
}

void declare_saga_id(CLI::App& c, arguments& a) { c.add_option("id", a.saga_id, "The saga id")->required(); }

int run_show(const command_line& cl, const arguments& a) {
  return cl.get(target({"v1", "admin", "sagas", a.saga_id}), saga_timeline);
}

// retry or abort
int act(const command_line& cl, const arguments& a, const char* action) {
  return cl.post(target({"v1", "admin", "sagas", a.saga_id, action}), json::object(), saga_timeline);
}
int run_retry(const command_line& cl, const arguments& a) { return act(cl, a, "retry"); }
int run_abort(const command_line& cl, const arguments& a) { return act(cl, a, "abort"); }

int run_watch(const command_line& cl, const arguments& a) { return cl.watch(a.saga_id); }

// ---- accounts ----

void declare_account_id(CLI::App& c, arguments& a) { c.add_option("id", a.account.id, "The account id")->required(); }

// --limit (its help says what is paged) and --after.
void declare_page(CLI::App& c, arguments& a, const char* limit_help) {
  c.add_option("--limit", a.account.limit, limit_help)->check(CLI::Range(1, 500));
  c.add_option("--after", a.account.after, "The next page's cursor, from the previous page");
}

void declare_account_show(CLI::App& c, arguments& a) {
  declare_account_id(c, a);
  c.add_flag("--strong", a.account.strong, "Read the owning shard, not the projection");
}

int run_account_show(const command_line& cl, const arguments& a) {
  return cl.get(target({"v1", "accounts", a.account.id}, {{"consistency", a.account.strong ? "strong" : ""}}), account);
}

void declare_entries(CLI::App& c, arguments& a) {
  declare_account_id(c, a);
  declare_page(c, a, "Entries per page (1-500)");
}

int run_entries(const command_line& cl, const arguments& a) {
  const auto& p = a.account;
  return cl.get(target({"v1", "accounts", p.id, "entries"}, {{"limit", text(p.limit)}, {"after", text(p.after)}}),
                entries);
}

void declare_lots(CLI::App& c, arguments& a) {
  declare_account_id(c, a);
  c.add_option("--state", a.account.lot_state, "open, or all")
      ->check(CLI::IsMember({"open", "all"}))
      ->capture_default_str();
  declare_page(c, a, "Lots per page (1-500)");
}

int run_lots(const command_line& cl, const arguments& a) {
  const auto& p = a.account;
  return cl.get(target({"v1", "accounts", p.id, "lots"},
                       {{"state", p.lot_state}, {"limit", text(p.limit)}, {"after", text(p.after)}}),
                lots);
}

// ---- writes ----

void declare_amount(CLI::App& c, arguments& a) {
  c.add_option("--amount", a.write.amount, "In the account's smallest unit")->required();
}

void declare_biz_id(CLI::App& c, arguments& a) {
  c.add_option("--biz-id", a.write.biz_id, "The idempotency key: the same one again is a replay, never a second effect")
      ->required();
}

// --account, --amount and --biz-id: a credit's or a deduction's.
void declare_account_write(CLI::App& c, arguments& a) {
  c.add_option("--account", a.write.account, "The account id")->required();
  declare_amount(c, a);
  declare_biz_id(c, a);
}

void declare_credit(CLI::App& c, arguments& a) {
  declare_account_write(c, a);
  c.add_option("--memo", a.write.memo, "A note kept with the credit");
  c.add_option("--expires-at", a.write.expires_at, "When the credit expires: RFC 3339 UTC, e.g. 2027-01-31T00:00:00Z");
  c.add_option("--rule-version", a.write.rule_version, "The expiry rule's version recorded on the lot");
}

int run_credit(const command_line& cl, const arguments& a) {
  const auto& w = a.write;
  json body{{"account_id", w.account}, {"amount", w.amount}, {"biz_id", w.biz_id}};
  if (!w.memo.empty()) body["memo"] = w.memo;
  if (!w.expires_at.empty()) body["expires_at"] = w.expires_at;
  if (!w.rule_version.empty()) body["rule_version"] = w.rule_version;
  return cl.post(cl.write_target("credits"), body, saga_timeline);
}

void declare_deduct(CLI::App& c, arguments& a) {
  declare_account_write(c, a);
  c.add_option("--hold-timeout-ms", a.write.hold_timeout_ms, "Hold the amount and wait this long for a confirmation");
}

int run_deduct(const command_line& cl, const arguments& a) {
  const auto& w = a.write;
  json body{{"account_id", w.account}, {"amount", w.amount}, {"biz_id", w.biz_id}};
  if (w.hold_timeout_ms) body["hold_timeout_ms"] = *w.hold_timeout_ms;
  return cl.post(cl.write_target("deductions"), body, saga_timeline);
}

void declare_transfer(CLI::App& c, arguments& a) {
  c.add_option("--from", a.write.from, "The account paying")->required();
  c.add_option("--to", a.write.to, "The account paid")->required();
  declare_amount(c, a);
  declare_biz_id(c, a);
  c.add_option("--timeout-ms", a.write.timeout_ms, "The saga's deadline (1-300000)");
}

int run_transfer(const command_line& cl, const arguments& a) {
  const auto& w = a.write;
  json body{{"from_account", w.from}, {"to_account", w.to}, {"amount", w.amount}, {"biz_id", w.biz_id}};
  if (w.timeout_ms) body["timeout_ms"] = *w.timeout_ms;
  return cl.post(cl.write_target("transfers"), body, saga_timeline);
}

void declare_refund(CLI::App& c, arguments& a) {
  c.add_option("--original", a.write.original, "The saga refunded")->required();
  declare_biz_id(c, a);
  c.add_option("--amount", a.write.refund_amount, "How much (a batch item: what is left when left out)");
  c.add_option("--account", a.write.account, "A batch deduction's item, by account (all items when left out)");
}

int run_refund(const command_line& cl, const arguments& a) {
  const auto& w = a.write;
  json body{{"original_saga_id", w.original}, {"biz_id", w.biz_id}};
  if (w.refund_amount) body["amount"] = *w.refund_amount;
  if (!w.account.empty()) body["account_id"] = w.account;
  return cl.post(cl.write_target("refunds"), body, saga_timeline);
}

// ---- reconcile ----

void declare_shard(CLI::App& c, arguments& a) {
  c.add_option("--shard", a.reconcile.shard, "The shard's number in the routing, from 0")->required();
}

// A reconcile command's target: `path` on the shard --shard names, with
// one more query parameter where the command takes one.
std::string on_shard(const arguments& a, std::initializer_list<std::string> path,
                     std::pair<std::string, std::string> more = {}) {
  return target(path, {{"shard", std::to_string(a.reconcile.shard)}, std::move(more)});
}

void declare_run(CLI::App& c, arguments& a) {
  declare_shard(c, a);
  c.add_flag("--full", a.reconcile.full, "Every account from its first entry, in one snapshot");
}

int run_reconcile(const command_line& cl, const arguments& a) {
  return cl.get(on_shard(a, {"v1", "admin", "reconciliation"}, {"mode", a.reconcile.full ? "full" : "incremental"}),
                reconciliation_run);
}

void declare_audit_start(CLI::App& c, arguments& a) {
  declare_shard(c, a);
  c.add_flag("--no-freeze", a.reconcile.no_freeze, "Report differences without freezing the accounts");
}

int run_audit_start(const command_line& cl, const arguments& a) {
  return cl.post(on_shard(a, {"v1", "admin", "audits"}, {"freeze", a.reconcile.no_freeze ? "false" : "true"}),
                 json::object(), audit);
}

void declare_audit_id(CLI::App& c, arguments& a) {
  declare_shard(c, a);
  c.add_option("audit_id", a.reconcile.audit_id, "The audit's id")->required();
}

int run_audit_show(const command_line& cl, const arguments& a) {
  return cl.get(on_shard(a, {"v1", "admin", "audits", std::to_string(a.reconcile.audit_id)}), audit);
}

int run_audit_cancel(const command_line& cl, const arguments& a) {
  const auto id = std::to_string(a.reconcile.audit_id);
  return cl.post(on_shard(a, {"v1", "admin", "audits", id, "cancel"}), json::object(), audit);
}

int run_audit_list(const command_line& cl, const arguments& a) {
  return cl.get(on_shard(a, {"v1", "admin", "audits"}), audits);
}

void declare_reports(CLI::App& c, arguments& a) {
  declare_shard(c, a);
  c.add_option("--limit", a.reconcile.reports_limit, "How many (1-100)")->check(CLI::Range(1, 100));
}

int run_reports(const command_line& cl, const arguments& a) {
  return cl.get(on_shard(a, {"v1", "admin", "reconciliation", "reports"}, {"limit", text(a.reconcile.reports_limit)}),
                reconciliation_reports);
}

int run_clusters(const command_line& cl, const arguments&) {
  return cl.get(target({"v1", "admin", "clusters"}), clusters);
}

// In the order --help lists them.
constexpr std::array all_commands{
    command{"sagas list", "Sagas, newest first, a page at a time", declare_list, run_list},
    command{"sagas counts", "How many sagas are in each state, and how many are overdue", no_options, run_counts},
    command{"sagas show", "A saga with every attempt of every step, as a timeline", declare_saga_id, run_show},
    command{"sagas retry", "Re-send every waiting call of a saga now", declare_saga_id, run_retry},
    command{"sagas abort", "Compensate a saga that has not passed its pivot", declare_saga_id, run_abort},
    command{"sagas watch", "Print a saga's state, then every change until it ends", declare_saga_id, run_watch},
    command{"accounts show", "Balance, held, available and the next expiry", declare_account_show, run_account_show},
    command{"accounts entries", "The account's ledger entries, oldest first", declare_entries, run_entries},
    command{"accounts lots", "The account's grant lots, in the order they are consumed", declare_lots, run_lots},
    command{"credit", "Credit an account (optionally expiring)", declare_credit, run_credit},
    command{"deduct", "Deduct from an account, at once or held for a confirmation", declare_deduct, run_deduct},
    command{"transfer", "Move value from one account to another", declare_transfer, run_transfer},
    command{"refund", "Refund a deduction or transfer, or revoke batch deduction items", declare_refund, run_refund},
    command{"reconcile run",
            "Reconcile a shard now: the accounts written since the last run (accounts with a difference are frozen)",
            declare_run, run_reconcile},
    command{"reconcile audit start", "Start a full audit (accounts with a difference are frozen)", declare_audit_start,
            run_audit_start},
    command{"reconcile audit show", "An audit and its progress", declare_audit_id, run_audit_show},
    command{"reconcile audit cancel", "Cancel a running audit", declare_audit_id, run_audit_cancel},
    command{"reconcile audit list", "A shard's full audits, newest first", declare_shard, run_audit_list},
    command{"reconcile reports", "A shard's last reconciliation runs, newest first", declare_reports, run_reports},
    command{"clusters", "The replicated databases: nodes, roles, lag, the last failover (operator key)", no_options,
            run_clusters},
};

constexpr std::array all_groups{
    command_group{"sagas", "Find, inspect and repair sagas (operator key)"},
    command_group{"accounts", "Read an account, its ledger entries and its lots"},
    command_group{"reconcile", "Run a shard's reconciliation, or read its last reports"},
    command_group{"reconcile audit", "Full audits of a shard: every account, in the background"},
};

}  // namespace

std::span<const command> commands() { return all_commands; }
std::span<const command_group> command_groups() { return all_groups; }

}  // namespace tally::ctl
