// tallyctl: the operators' and scripts' command line over the gateway's API.
//   tallyctl [--url URL] [--key KEY] [--json] <command> ...   (tallyctl --help)
// Exit status: 0 success, 1 the API answered an error (its code and message
// on stderr) or could not be reached, 2 a usage error.
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <boost/url/url.hpp>
#include <nlohmann/json.hpp>

#include "common/http/target.hpp"
#include "gateway/tallyctl/api_client.hpp"
#include "gateway/tallyctl/render.hpp"

namespace {

using nlohmann::json;
using namespace tally;

struct options {
  std::string url = "http://127.0.0.1:8080";
  std::string key;
  bool as_json = false;
  std::int64_t wait_ms = 5000;
};

// A target: path segments (encoded here) and query parameters (empty ones left out).
std::string target(std::initializer_list<std::string> segments,
                   std::initializer_list<std::pair<std::string, std::string>> query = {}) {
  boost::urls::url u;
  std::string path;
  for (const auto& s : segments) path += "/" + http::encoded_segment(s);
  u.set_encoded_path(path);
  for (const auto& [k, v] : query)
    if (!v.empty()) u.params().append({k, v});
  return std::string(u.buffer());
}

std::string text(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : ""; }

bool terminal(const json& saga) {
  const auto state = saga.value("state", "");
  return state == "completed" || state == "failed" || state == "compensated";
}

class command_line {
 public:
  explicit command_line(const options& o) : o_(o) {}

  // Runs one request; prints the answer (rendered, or as JSON) and returns the exit status.
  int show(const ctl::api_reply& r, std::string (*render)(const json&)) const {
    if (r.status == 0) {
      std::cerr << "tallyctl: cannot reach " << o_.url << ": " << r.transport << "\n";
      return 1;
    }
    if (r.status >= 400) {
      const auto e = r.body.is_object() ? r.body.value("error", json::object()) : json::object();
      std::cerr << "tallyctl: " << e.value("code", "http_" + std::to_string(r.status)) << ": "
                << e.value("message", r.body.is_string() ? r.body.get<std::string>() : r.body.dump()) << " (HTTP "
                << r.status << ", request " << e.value("request_id", "-") << ")\n";
      return 1;
    }
    std::cout << (o_.as_json ? r.body.dump(2) + "\n" : render(r.body));
    return 0;
  }

  ctl::api_client client() const {
    auto at = ctl::parse_url(o_.url);
    const auto timeout = std::chrono::milliseconds(o_.wait_ms + 10000);
    return ctl::api_client(at ? *at : ctl::endpoint{}, o_.key, timeout);
  }

  // Follows a saga until it ends: its state once subscribed, then each
  // change. The saga is read again whenever a frame (a change, or the
  // server's ping) comes more than 5 s after the last read, so a change
  // that raced the subscription is still seen.
  int watch(const std::string& id) const {
    auto api = client();
    std::string last_state, why;
    int failed = 0;
    auto last_read = std::chrono::steady_clock::time_point{};
    auto seen = [&](const json& saga) {
      if (saga.value("state", "") != last_state) print_state(saga);
      last_state = saga.value("state", "");
      return !terminal(saga);
    };
    const bool ok = api.watch_saga(
        id,
        [&](const json& frame) {
          if (frame.is_object() && frame.value("type", "") == "saga" && !seen(frame["saga"])) return false;
          if (std::chrono::steady_clock::now() - last_read < std::chrono::seconds(5)) return true;
          last_read = std::chrono::steady_clock::now();
          auto now = api.get(target({"v1", "sagas", id}, {{"consistency", "strong"}}));
          if (now.status == 200) return seen(now.body);
          failed = show(now, ctl::saga_line);
          return false;
        },
        why);
    if (failed) return failed;
    if (!ok || !terminal(json{{"state", last_state}})) {
      std::cerr << "tallyctl: " << why << "\n";
      return 1;
    }
    return 0;
  }

  std::string write_target(const char* collection) const {
    return target({"v1", collection}, {{"wait_ms", std::to_string(o_.wait_ms)}});
  }

 private:
  void print_state(const json& saga) const {
    std::cout << (o_.as_json ? saga.dump() + "\n" : ctl::saga_line(saga)) << std::flush;
  }

  const options& o_;
};

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"tallyctl: Tally's command line, over the gateway's public and operator API"};
  app.require_subcommand(1);
  app.add_option("--url", o.url, "The gateway, http://host:port")->envname("TALLY_URL")->capture_default_str();
  app.add_option("--key", o.key, "An API key (an operator key for sagas and reconcile)")->envname("TALLY_API_KEY");
  app.add_flag("--json", o.as_json, "Print the API's JSON instead of tables");
  app.add_option("--wait-ms", o.wait_ms, "How long a write waits for its saga to finish (0-30000)")
      ->check(CLI::Range(0, 30000))
      ->capture_default_str();

  command_line cl(o);
  std::function<int()> run;
  auto api = [&] { return cl.client(); };

  // ---- sagas ----
  auto* sagas = app.add_subcommand("sagas", "Find, inspect and repair sagas (operator key)")->require_subcommand(1);
  struct {
    std::string state, type, biz_id, account, created_after, created_before, cursor;
    std::optional<std::int64_t> older_than_ms, limit;
    bool overdue = false, oldest_first = false;
  } list;
  auto* list_cmd = sagas->add_subcommand("list", "Sagas, newest first, a page at a time");
  list_cmd->add_option("--state", list.state,
                       "pending, running, awaiting_confirmation, compensating, completed, "
                       "failed, compensated or needs_attention");
  list_cmd->add_option("--type", list.type, "credit, deduct, refund, transfer or batch_deduct");
  list_cmd->add_option("--biz-id", list.biz_id, "The business key");
  list_cmd->add_option("--account", list.account, "Naming this account (not a batch deduction's items)");
  list_cmd->add_option("--created-after", list.created_after, "Created at or after (RFC 3339, UTC)");
  list_cmd->add_option("--created-before", list.created_before, "Created before (RFC 3339, UTC)");
  list_cmd->add_option("--older-than-ms", list.older_than_ms, "Created at least this long ago");
  list_cmd->add_flag("--oldest-first", list.oldest_first, "Oldest first instead");
  list_cmd->add_flag("--overdue", list.overdue, "Only sagas past their deadline that have not finished");
  list_cmd->add_option("--limit", list.limit, "Sagas per page (1-500)")->check(CLI::Range(1, 500));
  list_cmd->add_option("--cursor", list.cursor, "The next page's cursor, from the previous page");
  list_cmd->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "admin", "sagas"}, {{"state", list.state},
                                                                 {"type", list.type},
                                                                 {"biz_id", list.biz_id},
                                                                 {"account", list.account},
                                                                 {"created_after", list.created_after},
                                                                 {"created_before", list.created_before},
                                                                 {"older_than_ms", text(list.older_than_ms)},
                                                                 {"order", list.oldest_first ? "oldest" : ""},
                                                                 {"overdue", list.overdue ? "true" : ""},
                                                                 {"limit", text(list.limit)},
                                                                 {"cursor", list.cursor}})),
                     ctl::sagas_list);
    };
  });
  sagas->add_subcommand("counts", "How many sagas are in each state, and how many are overdue")->callback([&] {
    run = [&] { return cl.show(api().get(target({"v1", "admin", "sagas", "counts"})), ctl::saga_counts); };
  });
  std::string saga_id;
  auto* show_cmd = sagas->add_subcommand("show", "A saga with every attempt of every step, as a timeline");
  show_cmd->add_option("id", saga_id, "The saga id")->required();
  show_cmd->callback([&] {
    run = [&] { return cl.show(api().get(target({"v1", "admin", "sagas", saga_id})), ctl::saga_timeline); };
  });
  for (const char* action : {"retry", "abort"}) {
    auto* act = sagas->add_subcommand(action, std::string(action) == "retry"
                                                  ? "Re-send every waiting call of a saga now"
                                                  : "Compensate a saga that has not passed its pivot");
    act->add_option("id", saga_id, "The saga id")->required();
    act->callback([&, action] {
      run = [&, action] {
        return cl.show(api().post(target({"v1", "admin", "sagas", saga_id, action}), json::object()),
                       ctl::saga_timeline);
      };
    });
  }
  auto* watch_cmd = sagas->add_subcommand("watch", "Print a saga's state, then every change until it ends");
  watch_cmd->add_option("id", saga_id, "The saga id")->required();
  watch_cmd->callback([&] { run = [&] { return cl.watch(saga_id); }; });

  // ---- accounts ----
  auto* accounts =
      app.add_subcommand("accounts", "Read an account, its ledger entries and its lots")->require_subcommand(1);
  std::string account_id, lot_state = "open";
  bool strong = false;
  std::optional<std::int64_t> page_limit, page_after;
  auto* acc_show = accounts->add_subcommand("show", "Balance, held, available and the next expiry");
  acc_show->add_option("id", account_id, "The account id")->required();
  acc_show->add_flag("--strong", strong, "Read the owning shard, not the projection");
  acc_show->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "accounts", account_id}, {{"consistency", strong ? "strong" : ""}})),
                     ctl::account);
    };
  });
  auto* acc_entries = accounts->add_subcommand("entries", "The account's ledger entries, oldest first");
  acc_entries->add_option("id", account_id, "The account id")->required();
  acc_entries->add_option("--limit", page_limit, "Entries per page (1-500)")->check(CLI::Range(1, 500));
  acc_entries->add_option("--after", page_after, "The next page's cursor, from the previous page");
  acc_entries->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "accounts", account_id, "entries"},
                                      {{"limit", text(page_limit)}, {"after", text(page_after)}})),
                     ctl::entries);
    };
  });
  auto* acc_lots = accounts->add_subcommand("lots", "The account's grant lots, in the order they are consumed");
  acc_lots->add_option("id", account_id, "The account id")->required();
  acc_lots->add_option("--state", lot_state, "open, or all")
      ->check(CLI::IsMember({"open", "all"}))
      ->capture_default_str();
  acc_lots->add_option("--limit", page_limit, "Lots per page (1-500)")->check(CLI::Range(1, 500));
  acc_lots->add_option("--after", page_after, "The next page's cursor, from the previous page");
  acc_lots->callback([&] {
    run = [&] {
      return cl.show(
          api().get(target({"v1", "accounts", account_id, "lots"},
                           {{"state", lot_state}, {"limit", text(page_limit)}, {"after", text(page_after)}})),
          ctl::lots);
    };
  });

  // ---- writes ----
  struct {
    std::string account, from, to, biz_id, memo, expires_at, rule_version, original;
    std::int64_t amount = 0;
    std::optional<std::int64_t> hold_timeout_ms, timeout_ms, refund_amount;
  } w;
  auto amount = [&](CLI::App* c) {
    return c->add_option("--amount", w.amount, "In the account's smallest unit")->required();
  };
  auto biz = [&](CLI::App* c) {
    return c
        ->add_option("--biz-id", w.biz_id, "The idempotency key: the same one again is a replay, never a second effect")
        ->required();
  };
  auto* credit = app.add_subcommand("credit", "Credit an account (optionally expiring)");
  credit->add_option("--account", w.account, "The account id")->required();
  amount(credit);
  biz(credit);
  credit->add_option("--memo", w.memo, "A note kept with the credit");
  credit->add_option("--expires-at", w.expires_at, "When the credit expires: RFC 3339 UTC, e.g. 2027-01-31T00:00:00Z");
  credit->add_option("--rule-version", w.rule_version, "The expiry rule's version recorded on the lot");
  credit->callback([&] {
    run = [&] {
      json body{{"account_id", w.account}, {"amount", w.amount}, {"biz_id", w.biz_id}};
      if (!w.memo.empty()) body["memo"] = w.memo;
      if (!w.expires_at.empty()) body["expires_at"] = w.expires_at;
      if (!w.rule_version.empty()) body["rule_version"] = w.rule_version;
      return cl.show(api().post(cl.write_target("credits"), body), ctl::saga_timeline);
    };
  });
  auto* deduct = app.add_subcommand("deduct", "Deduct from an account, at once or held for a confirmation");
  deduct->add_option("--account", w.account, "The account id")->required();
  amount(deduct);
  biz(deduct);
  deduct->add_option("--hold-timeout-ms", w.hold_timeout_ms, "Hold the amount and wait this long for a confirmation");
  deduct->callback([&] {
    run = [&] {
      json body{{"account_id", w.account}, {"amount", w.amount}, {"biz_id", w.biz_id}};
      if (w.hold_timeout_ms) body["hold_timeout_ms"] = *w.hold_timeout_ms;
      return cl.show(api().post(cl.write_target("deductions"), body), ctl::saga_timeline);
    };
  });
  auto* transfer = app.add_subcommand("transfer", "Move value from one account to another");
  transfer->add_option("--from", w.from, "The account paying")->required();
  transfer->add_option("--to", w.to, "The account paid")->required();
  amount(transfer);
  biz(transfer);
  transfer->add_option("--timeout-ms", w.timeout_ms, "The saga's deadline (1-300000)");
  transfer->callback([&] {
    run = [&] {
      json body{{"from_account", w.from}, {"to_account", w.to}, {"amount", w.amount}, {"biz_id", w.biz_id}};
      if (w.timeout_ms) body["timeout_ms"] = *w.timeout_ms;
      return cl.show(api().post(cl.write_target("transfers"), body), ctl::saga_timeline);
    };
  });
  auto* refund = app.add_subcommand("refund", "Refund a deduction or transfer, or revoke batch deduction items");
  refund->add_option("--original", w.original, "The saga refunded")->required();
  biz(refund);
  refund->add_option("--amount", w.refund_amount, "How much (a batch item: what is left when left out)");
  refund->add_option("--account", w.account, "A batch deduction's item, by account (all items when left out)");
  refund->callback([&] {
    run = [&] {
      json body{{"original_saga_id", w.original}, {"biz_id", w.biz_id}};
      if (w.refund_amount) body["amount"] = *w.refund_amount;
      if (!w.account.empty()) body["account_id"] = w.account;
      return cl.show(api().post(cl.write_target("refunds"), body), ctl::saga_timeline);
    };
  });

  // ---- reconcile ----
  auto* reconcile =
      app.add_subcommand("reconcile", "Run a shard's reconciliation, or read its last reports")->require_subcommand(1);
  std::int64_t shard = 0;
  std::optional<std::int64_t> reports_limit;
  auto* rec_run = reconcile->add_subcommand(
      "run", "Reconcile a shard now: the accounts written since the last run (accounts with a difference are frozen)");
  rec_run->add_option("--shard", shard, "The shard's number in the routing, from 0")->required();
  bool full = false;
  rec_run->add_flag("--full", full, "Every account from its first entry, in one snapshot");
  rec_run->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "admin", "reconciliation"},
                                      {{"shard", std::to_string(shard)}, {"mode", full ? "full" : "incremental"}})),
                     ctl::reconciliation_run);
    };
  });
  // reconcile audit start|show|cancel|list: full audits in the background.
  auto* audit = reconcile->add_subcommand("audit", "Full audits of a shard: every account, in the background")
                    ->require_subcommand(1);
  std::int64_t audit_id = 0;
  bool no_freeze = false;
  auto* audit_start = audit->add_subcommand("start", "Start a full audit (accounts with a difference are frozen)");
  audit_start->add_option("--shard", shard, "The shard's number in the routing, from 0")->required();
  audit_start->add_flag("--no-freeze", no_freeze, "Report differences without freezing the accounts");
  audit_start->callback([&] {
    run = [&] {
      return cl.show(api().post(target({"v1", "admin", "audits"},
                                       {{"shard", std::to_string(shard)}, {"freeze", no_freeze ? "false" : "true"}}),
                                json::object()),
                     ctl::audit);
    };
  });
  for (const char* name : {"show", "cancel"}) {
    const bool cancel = std::string_view(name) == "cancel";
    auto* sub = audit->add_subcommand(name, cancel ? "Cancel a running audit" : "An audit and its progress");
    sub->add_option("--shard", shard, "The shard's number in the routing, from 0")->required();
    sub->add_option("audit_id", audit_id, "The audit's id")->required();
    sub->callback([&, cancel] {
      run = [&, cancel] {
        const auto id = std::to_string(audit_id);
        const auto on = std::to_string(shard);
        return cl.show(
            cancel ? api().post(target({"v1", "admin", "audits", id, "cancel"}, {{"shard", on}}), json::object())
                   : api().get(target({"v1", "admin", "audits", id}, {{"shard", on}})),
            ctl::audit);
      };
    });
  }
  auto* audit_list = audit->add_subcommand("list", "A shard's full audits, newest first");
  audit_list->add_option("--shard", shard, "The shard's number in the routing, from 0")->required();
  audit_list->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "admin", "audits"}, {{"shard", std::to_string(shard)}})), ctl::audits);
    };
  });
  auto* rec_reports = reconcile->add_subcommand("reports", "A shard's last reconciliation runs, newest first");
  rec_reports->add_option("--shard", shard, "The shard's number in the routing, from 0")->required();
  rec_reports->add_option("--limit", reports_limit, "How many (1-100)")->check(CLI::Range(1, 100));
  rec_reports->callback([&] {
    run = [&] {
      return cl.show(api().get(target({"v1", "admin", "reconciliation", "reports"},
                                      {{"shard", std::to_string(shard)}, {"limit", text(reports_limit)}})),
                     ctl::reconciliation_reports);
    };
  });

  app.add_subcommand("clusters", "The replicated databases: nodes, roles, lag, the last failover (operator key)")
      ->callback([&] { run = [&] {
                         return cl.show(api().get(target({"v1", "admin", "clusters"})), ctl::clusters);
                       }; });

  try {
    app.parse(argc, argv);
    if (!ctl::parse_url(o.url)) throw CLI::ValidationError("--url", "must be http://host:port, got " + o.url);
    if (o.key.empty()) throw CLI::RequiredError("--key (or TALLY_API_KEY)");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tallyctl: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
  return run();
}
