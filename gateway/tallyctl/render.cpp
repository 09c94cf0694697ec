#include "gateway/tallyctl/render.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

namespace tally::ctl {

using nlohmann::json;

namespace {

// A cell: strings as they are, null or absent as "-", anything else as JSON.
std::string cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string field(const json& doc, const char* key) { return cell(doc.contains(key) ? doc[key] : json()); }

// "code: message", or "-".
std::string error_of(const json& e) {
  if (!e.is_object()) return "-";
  return field(e, "code") + ": " + field(e, "message");
}

std::string next_line(const json& page) {
  const auto next = page.contains("next") ? page["next"] : json();
  return next.is_null() ? "" : "next page: " + cell(next) + "\n";
}

}  // namespace

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string sagas_list(const json& page) {
  std::vector<std::vector<std::string>> rows{{"SAGA", "TYPE", "STATE", "BIZ_ID", "CREATED", "ERROR"}};
  for (const auto& s : page.value("sagas", json::array()))
    rows.push_back({field(s, "saga_id"), field(s, "type"), field(s, "state"), field(s, "biz_id"),
                    field(s, "created_at"), error_of(s.value("error", json()))});
  return table(rows) + next_line(page);
}

std::string saga_counts(const json& counts) {
  std::vector<std::vector<std::string>> rows{{"STATE", "SAGAS"}};
  const auto by_state = counts.value("counts", json::object());
  for (const auto& [state, n] : by_state.items()) rows.push_back({state, cell(n)});
  rows.push_back({"overdue", field(counts, "overdue")});
  return table(rows);
}

std::string saga_line(const json& saga) {
  std::string line = field(saga, "saga_id") + "  " + field(saga, "state");
  if (saga.value("error", json()).is_object()) line += "  " + error_of(saga["error"]);
  return line + "\n";
}

std::string saga_timeline(const json& saga) {
  std::string out = field(saga, "type") + " saga " + field(saga, "saga_id") + " (biz_id " + field(saga, "biz_id") +
                    ")\n  state:    " + field(saga, "state") + "\n  input:    " + cell(saga.value("input", json())) +
                    "\n  created:  " + field(saga, "created_at") + "   deadline: " + field(saga, "deadline") +
                    "\n  error:    " + error_of(saga.value("error", json())) + "\n";
  if (saga.contains("refunded")) out += "  refunded: " + cell(saga["refunded"]) + "\n";
  std::vector<std::vector<std::string>> steps{{"STEP", "STATE", "ATTEMPTS", "STARTED", "FINISHED", "ERROR"}};
  for (const auto& s : saga.value("steps", json::array()))
    steps.push_back({field(s, "name"), field(s, "state"), field(s, "attempts"), field(s, "started_at"),
                     field(s, "finished_at"), error_of(s.value("error", json()))});
  out += "\n" + table(steps);
  if (!saga.contains("history")) return out;
  std::vector<std::vector<std::string>> attempts{
      {"SENT", "STEP", "ITEM", "KIND", "ATTEMPT", "SHARD", "OUTCOME", "CODE", "ANSWERED"}};
  for (const auto& a : saga["history"])
    attempts.push_back({field(a, "sent_at"), field(a, "step"), field(a, "item"),
                        a.value("compensation", false) ? "undo" : "forward", field(a, "attempt"), field(a, "shard"),
                        field(a, "outcome"), field(a, "code"), field(a, "answered_at")});
  return out + "\ntimeline (every attempt, in the order sent):\n" + table(attempts);
}

std::string account(const json& a) {
  std::vector<std::vector<std::string>> rows;
  for (const char* k : {"account_id", "balance", "held", "available", "status", "version", "updated_at", "next_expiry"})
    rows.push_back({k, field(a, k)});
  return table(rows);
}

std::string entries(const json& page) {
  std::vector<std::vector<std::string>> rows{{"SEQ", "BIZ_TYPE", "BIZ_ID", "DELTA", "BALANCE_AFTER", "CREATED"}};
  for (const auto& e : page.value("entries", json::array()))
    rows.push_back({field(e, "seq"), field(e, "biz_type"), field(e, "biz_id"), field(e, "delta"),
                    field(e, "balance_after"), field(e, "created_at")});
  return table(rows) + next_line(page);
}

std::string lots(const json& page) {
  std::vector<std::vector<std::string>> rows{
      {"LOT", "STATE", "GRANTED", "REMAINING", "HELD", "EXPIRES_AT", "RULE", "CREATED"}};
  for (const auto& l : page.value("lots", json::array()))
    rows.push_back({field(l, "lot_id"), field(l, "state"), field(l, "granted"), field(l, "remaining"), field(l, "held"),
                    field(l, "expires_at"), field(l, "rule_version"), field(l, "created_at")});
  return table(rows) + next_line(page);
}

std::string reconciliation_reports(const json& page) {
  std::vector<std::vector<std::string>> rows{
      {"REPORT", "SHARD", "RAN_AT", "MODE", "SINCE", "WATERMARK", "DIFFERENCES", "CLASSES", "FROZEN"}};
  for (const auto& r : page.value("reports", json::array()))
    rows.push_back({field(r, "report_id"), field(r, "shard"), field(r, "ran_at"), field(r, "mode"), field(r, "since"),
                    field(r, "watermark"), field(r, "differences"), cell(r.value("classes", json::object())),
                    cell(r.value("frozen", json()))});
  return table(rows);
}

namespace {
// The accounts with differences of a run or an audit, or nothing.
std::string differences_table(const json& doc) {
  std::vector<std::vector<std::string>> rows{{"ACCOUNT", "SNAPSHOT", "REBUILT", "DIFFERENCE", "FINDINGS"}};
  for (const auto& d : doc.value("accounts_with_differences", json::array()))
    rows.push_back({field(d, "account_id"), field(d, "snapshot"), field(d, "rebuilt"), field(d, "difference"),
                    cell(d.value("findings", json::array()))});
  return rows.size() > 1 ? table(rows) : "";
}
}  // namespace

std::string reconciliation_run(const json& report) {
  std::string out = report.value("mode", "full") == "incremental" ? "incremental since " + field(report, "since") + ", "
                                                                  : std::string("full, ");
  out += "watermark " + field(report, "watermark") + ": " + field(report, "accounts") + " accounts, " +
         field(report, "differences") + " with differences\n";
  out += differences_table(report);
  for (const auto& f : report.value("frozen", json::array())) out += "frozen: " + field(f, "account_id") + "\n";
  return out;
}

namespace {
// "40.0 %" of a progress between 0 and 1.
std::string percent(const json& progress) {
  if (!progress.is_number()) return "-";
  char out[16];
  std::snprintf(out, sizeof out, "%.1f %%", progress.get<double>() * 100);
  return out;
}
}  // namespace

std::string audit(const json& a) {
  std::string out = "audit " + field(a, "audit_id") + ": " + field(a, "state") + ", " + field(a, "accounts_checked") +
                    " of " + field(a, "accounts_total") + " accounts (" + percent(a.value("progress", json())) + "), " +
                    field(a, "differences") + " with differences\n";
  out += differences_table(a);
  for (const auto& f : a.value("frozen", json::array())) out += "frozen: " + cell(f) + "\n";
  return out;
}

std::string audits(const json& page) {
  std::vector<std::vector<std::string>> rows{
      {"AUDIT", "STATE", "CHECKED", "TOTAL", "PROGRESS", "DIFFERENCES", "STARTED_AT", "FINISHED_AT"}};
  for (const auto& a : page.value("audits", json::array()))
    rows.push_back({field(a, "audit_id"), field(a, "state"), field(a, "accounts_checked"), field(a, "accounts_total"),
                    percent(a.value("progress", json())), field(a, "differences"), field(a, "started_at"),
                    field(a, "finished_at")});
  return table(rows);
}

std::string clusters(const json& view) {
  if (!view.value("configured", false)) return "no replicated clusters: the gateway has no ha.monitor\n";
  std::string out;
  if (!view.value("monitor_reachable", false)) out += "the monitor does not answer; last seen:\n";
  for (const auto& f : view.value("formations", json::array())) {
    const auto last = f.value("last_failover", json());
    out += "formation " + field(f, "formation") + ": primary " + field(f, "primary") +
           (f.value("writable", false) ? ", writable" : ", NOT writable") + ", " + field(f, "synchronous_standbys") +
           " synchronous standbys, " + field(f, "failovers") + " failovers" +
           (last.is_object() ? ", the last " + field(last, "seconds_ago") + " s ago to " + field(last, "node") : "") +
           "\n";
    std::vector<std::vector<std::string>> rows{
        {"NODE", "ADDRESS", "STATE", "GOAL", "HEALTH", "TIMELINE", "LAG_BYTES", "SYNCHRONOUS", "REPORTED_MS_AGO"}};
    for (const auto& n : f.value("nodes", json::array()))
      rows.push_back({field(n, "name"), field(n, "host") + ":" + field(n, "port"), field(n, "state"), field(n, "goal"),
                      field(n, "health"), field(n, "timeline"), field(n, "lag_bytes"), field(n, "synchronous"),
                      field(n, "report_age_ms")});
    out += table(rows);
  }
  return out;
}

}  // namespace tally::ctl
