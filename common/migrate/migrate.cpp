#include "common/migrate/migrate.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "common/digest/digest.hpp"
#include "common/log/log.hpp"
#include "common/retry/backoff.hpp"

namespace tally::migrate {
namespace {

using conn_ptr = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

result_ptr exec(PGconn* c, const char* sql, std::vector<const char*> params = {}) {
  result_ptr r(PQexecParams(c, sql, static_cast<int>(params.size()), nullptr, params.data(), nullptr, nullptr, 0),
               &PQclear);
  auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw std::runtime_error(std::string("migration: ") + PQresultErrorMessage(r.get()));
  return r;
}

// Multi-statement scripts need the simple query protocol.
void exec_script(PGconn* c, const migration& m) {
  result_ptr r(PQexec(c, m.sql.c_str()), &PQclear);
  auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    throw std::runtime_error("migration " + std::to_string(m.version) + "_" + m.name + ": " +
                             PQresultErrorMessage(r.get()));
}

}  // namespace

std::vector<migration> load(const std::filesystem::path& dir) {
  static const std::regex pattern(R"(^(\d{4})_([a-z0-9_]+)\.sql$)");
  std::vector<migration> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::string file = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(file, m, pattern))
      throw std::runtime_error("badly named migration: " + entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    migration mig{std::stoi(m[1].str()), m[2].str(), text.str(), ""};
    mig.checksum = digest::sha256_hex(mig.sql);
    out.push_back(std::move(mig));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].version == out[i - 1].version)
      throw std::runtime_error("two migrations with version " + std::to_string(out[i].version) + " in " + dir.string());
  return out;
}

outcome apply(const std::string& conninfo, const std::vector<migration>& migrations) {
  conn_ptr c(PQconnectdb(conninfo.c_str()), &PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK)
    throw std::runtime_error(std::string("migration: ") + PQerrorMessage(c.get()));
  exec(c.get(), "SET client_min_messages = warning");
  exec(c.get(), "BEGIN");
  // Taken before the table exists: concurrent CREATE TABLE IF NOT EXISTS can
  // otherwise fail on the catalog's unique index.
  exec(c.get(), "SELECT pg_advisory_xact_lock(7361626579)");
  exec(c.get(),
       "CREATE TABLE IF NOT EXISTS schema_version (version int PRIMARY KEY, name text NOT NULL, "
       "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  auto applied = exec(c.get(), "SELECT version, checksum FROM schema_version ORDER BY version");
  outcome result;
  std::vector<std::pair<int, std::string>> done;
  for (int i = 0; i < PQntuples(applied.get()); ++i)
    done.emplace_back(std::stoi(PQgetvalue(applied.get(), i, 0)), PQgetvalue(applied.get(), i, 1));
  for (const auto& m : migrations) {
    auto it = std::find_if(done.begin(), done.end(), [&](const auto& d) { return d.first == m.version; });
    if (it != done.end()) {
      if (it->second != m.checksum)
        throw std::runtime_error("migration " + std::to_string(m.version) + "_" + m.name +
                                 " was changed after it was applied");
      result.current_version = std::max(result.current_version, m.version);
      continue;
    }
    exec_script(c.get(), m);
    std::string version = std::to_string(m.version);
    exec(c.get(), "INSERT INTO schema_version (version, name, checksum) VALUES ($1, $2, $3)",
         {version.c_str(), m.name.c_str(), m.checksum.c_str()});
    ++result.applied;
    result.current_version = m.version;
  }
  exec(c.get(), "COMMIT");
  return result;
}

outcome apply_when_reachable(const std::string& conninfo, const std::filesystem::path& dir) {
  // About a minute: a second between tries.
  constexpr retry::backoff wait_for_database{std::chrono::seconds(1), std::chrono::seconds(1), 60};
  auto migrations = load(dir);
  for (std::size_t retries = 0;; ++retries) {
    try {
      auto r = migrate::apply(conninfo, migrations);
      log::info("migrations", {{"applied", r.applied}, {"version", r.current_version}});
      return r;
    } catch (const std::exception& e) {
      if (retry::spent(wait_for_database, retries) ||
          std::string_view(e.what()).find("changed after") != std::string_view::npos)
        throw;
      log::warn("migrations: database not reachable yet", {{"error", e.what()}});
      std::this_thread::sleep_for(retry::delay(wait_for_database, retries));
    }
  }
}

}  // namespace tally::migrate
