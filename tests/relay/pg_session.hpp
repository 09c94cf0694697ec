#pragma once
// A blocking libpq session for the relay's tests: it can hold a
// transaction open between statements while the relay reads.
#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace tally::relay_test {

class session {
 public:
  explicit session(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str()), &PQfinish) {
    if (PQstatus(c_.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c_.get()));
  }
  void exec(const std::string& sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(c_.get(), sql.c_str()), &PQclear);
    const auto s = PQresultStatus(r.get());
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) throw std::runtime_error(PQerrorMessage(c_.get()));
  }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> c_;
};

// An event of a new account in a shard's outbox.
inline std::string event_sql(const std::string& account) {
  return "INSERT INTO outbox_event (tenant, account_id, aggregate_version, event_type, payload) VALUES ('t', '" +
         account + "', 1, 'account.opened', '{\"account_id\":\"" + account + "\"}')";
}

}  // namespace tally::relay_test
