#pragma once
// PostgreSQL failures as std::error_code, with SQLSTATE classes mapped to
// the conditions callers act on (retry the transaction, report a conflict,
// reconnect).
#include <string>
#include <string_view>
#include <system_error>

namespace tally::pg {

enum class errc {
  connection_failed = 1,  // could not connect (or SQLSTATE class 08)
  connection_lost,        // the connection broke mid-operation: outcome unknown
  timeout,                // the operation did not finish in time: outcome unknown
  query_failed,           // any other server error
  unique_violation,       // 23505
  check_violation,        // 23514
  serialization_failure,  // 40001
  deadlock_detected,      // 40P01
  lock_not_available,     // 55P03
  admin_shutdown,         // 57P01..57P03: the server is going away
  read_only,              // 25006
  undefined_object,       // 42P01, 42703, 42883: schema not as expected
  pool_exhausted,         // no connection became free in time
  fenced,                 // this process lost the right to write
  // The server committed locally but its wait for a synchronous standby
  // was cancelled (a WARNING, not an error): outcome unknown, since the
  // commit may be lost with the primary.
  commit_not_replicated,
  // The primary has no synchronous standby (SQLSTATE TL001, raised by
  // require_synchronous_standby()): the write was refused, nothing committed.
  no_synchronous_standby,
};

const std::error_category& category();
std::error_code make_error_code(errc e);
errc errc_from_sqlstate(std::string_view sqlstate);
// Whether a notice (its non-localized severity and its message) is the
// server's warning that a commit returned without its synchronous standby's
// confirmation: "canceling wait for synchronous replication due to user
// request" (a cancel, a statement timeout) or "canceling the wait for
// synchronous replication and terminating connection …". The messages are
// PostgreSQL's English ones: the servers run with lc_messages = C.
bool is_unreplicated_commit_warning(std::string_view severity, std::string_view message);
// True when re-running the whole transaction may succeed (read_only: on
// a new connection, which finds the primary).
bool is_transient(std::error_code ec);
// True when the outcome of a COMMIT sent before the failure is unknown.
bool is_outcome_unknown(std::error_code ec);

// An error with the server's text, kept apart from what clients are told.
struct error {
  std::error_code code;
  std::string sqlstate;
  std::string message;
  explicit operator bool() const { return static_cast<bool>(code); }
};

}  // namespace tally::pg

template <>
struct std::is_error_code_enum<tally::pg::errc> : std::true_type {};
