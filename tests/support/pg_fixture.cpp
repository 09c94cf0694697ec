#include "tests/support/pg_fixture.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>

namespace tally::test {
namespace {

using conn_ptr = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

conn_ptr connect(const std::string& conninfo) {
  conn_ptr c(PQconnectdb(conninfo.c_str()), &PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK) throw std::runtime_error(std::string("connect: ") + PQerrorMessage(c.get()));
  return c;
}

result_ptr run(const std::string& conninfo, const std::string& sql) {
  auto c = connect(conninfo);
  result_ptr r(PQexec(c.get(), sql.c_str()), &PQclear);
  auto s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
    throw std::runtime_error("sql failed: " + sql + ": " + PQresultErrorMessage(r.get()));
  return r;
}

}  // namespace

std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set: run the tests through scripts/test");
  return v;
}

std::string pg_conninfo(std::string_view database) {
  return "host=" + env_or_throw("TALLY_TEST_PG_HOST") + " port=" + env_or_throw("TALLY_TEST_PG_PORT") +
         " user=postgres dbname=" + std::string(database);
}

std::string create_database(std::string_view prefix) {
  std::random_device rd;
  std::string name = std::string(prefix) + "_" + std::to_string(rd() % 100000000);
  exec_sql(pg_conninfo("postgres"), "CREATE DATABASE " + name);
  return pg_conninfo(name);
}

void exec_sql(const std::string& conninfo, const std::string& sql) { run(conninfo, sql); }

std::int64_t query_int(const std::string& conninfo, const std::string& sql) {
  auto r = run(conninfo, sql);
  if (PQntuples(r.get()) != 1 || PQgetisnull(r.get(), 0, 0)) throw std::runtime_error("expected one value: " + sql);
  return std::stoll(PQgetvalue(r.get(), 0, 0));
}

std::vector<std::vector<std::string>> query_rows(const std::string& conninfo, const std::string& sql) {
  auto r = run(conninfo, sql);
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    std::vector<std::string> row;
    for (int k = 0; k < PQnfields(r.get()); ++k) row.emplace_back(PQgetvalue(r.get(), i, k));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string bin_dir() { return env_or_throw("TALLY_TEST_BIN_DIR"); }
std::string source_dir() { return TALLY_SOURCE_DIR; }

}  // namespace tally::test
