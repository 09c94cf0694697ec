#pragma once
// Schema migrations: migrations/<database>/NNNN_name.sql, applied in version
// order in one transaction, each recorded in schema_version with a checksum.
// A transaction-level advisory lock makes two processes starting at once
// take turns; the second finds nothing left to do. An applied migration
// whose file has changed since is refused (the service must not start).
// Runs at start-up, before serving, so it uses libpq's blocking API.
#include <filesystem>
#include <string>
#include <vector>

namespace tally::migrate {

struct migration {
  int version = 0;
  std::string name;
  std::string sql;
  std::string checksum;  // SHA-256 of sql, hex
};

// Reads and orders the folder's migrations; throws std::runtime_error on a
// badly named file or a repeated version.
std::vector<migration> load(const std::filesystem::path& dir);

struct outcome {
  int applied = 0;  // migrations applied by this call
  int current_version = 0;
};

// Applies what is pending; throws std::runtime_error with the server's
// message when a migration fails or an applied one was edited.
outcome apply(const std::string& conninfo, const std::vector<migration>& migrations);

// Loads `dir` and applies it, waiting up to a minute for the database to
// accept connections (it may still be starting); logs what it applied. A
// changed migration fails at once.
outcome apply_when_reachable(const std::string& conninfo, const std::filesystem::path& dir);

}  // namespace tally::migrate
