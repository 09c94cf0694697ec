#pragma once
// Test access to the throwaway PostgreSQL server that scripts/test starts
// (TALLY_TEST_PG_HOST/PORT). Each suite creates its own database, so tests
// can run in parallel against one server.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tally::test {

// An environment variable that scripts/test sets; throws when it is missing.
std::string env_or_throw(const char* name);
std::string pg_conninfo(std::string_view database);
// Creates a fresh database named PREFIX_<random> and returns its conninfo.
std::string create_database(std::string_view prefix);
void exec_sql(const std::string& conninfo, const std::string& sql);
std::int64_t query_int(const std::string& conninfo, const std::string& sql);
std::vector<std::vector<std::string>> query_rows(const std::string& conninfo, const std::string& sql);
// The build directory holding the service binaries (TALLY_TEST_BIN_DIR).
std::string bin_dir();
std::string source_dir();

}  // namespace tally::test
