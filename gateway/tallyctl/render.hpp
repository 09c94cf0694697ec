#pragma once
// tallyctl's human output: the API's JSON documents as text tables and a
// saga's timeline. Pure (JSON in, text out), so every layout is tested
// without a server.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tally::ctl {

// Columns padded to their widest cell; the header row first.
std::string table(const std::vector<std::vector<std::string>>& rows);

// {"sagas": [...], "next"}: one line per saga, and the next page's cursor.
std::string sagas_list(const nlohmann::json& page);
// {"counts": {...}, "overdue": n}
std::string saga_counts(const nlohmann::json& counts);
// A saga (with "history" when an operator read it): its input, state,
// error, then each attempt in the order it was sent, with its outcome.
std::string saga_timeline(const nlohmann::json& saga);
// One line for a saga's state change (sagas watch).
std::string saga_line(const nlohmann::json& saga);
std::string account(const nlohmann::json& account);
// {"entries": [...], "next"}
std::string entries(const nlohmann::json& page);
// {"lots": [...], "next"}
std::string lots(const nlohmann::json& page);
// {"reports": [...]}
std::string reconciliation_reports(const nlohmann::json& page);
// One run's answer (GET /v1/admin/reconciliation).
std::string reconciliation_run(const nlohmann::json& report);
// A full audit with its progress (GET /v1/admin/audits/{id}), and a list.
std::string audit(const nlohmann::json& a);
std::string audits(const nlohmann::json& page);
// GET /v1/admin/clusters: per formation a summary line, then its nodes.
std::string clusters(const nlohmann::json& view);

}  // namespace tally::ctl
