#include "common/pg/error.hpp"

namespace tally::pg {
namespace {

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tally.pg"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::connection_failed: return "connection failed";
      case errc::connection_lost: return "connection lost";
      case errc::timeout: return "timeout";
      case errc::query_failed: return "query failed";
      case errc::unique_violation: return "unique violation";
      case errc::check_violation: return "check violation";
      case errc::serialization_failure: return "serialization failure";
      case errc::deadlock_detected: return "deadlock detected";
      case errc::lock_not_available: return "lock not available";
      case errc::admin_shutdown: return "server shutting down";
      case errc::read_only: return "read-only transaction";
      case errc::undefined_object: return "undefined object";
      case errc::pool_exhausted: return "connection pool exhausted";
      case errc::fenced: return "writer fenced";
      case errc::commit_not_replicated: return "commit not confirmed by a synchronous standby";
      case errc::no_synchronous_standby: return "no synchronous standby";
    }
    return "unknown pg error";
  }
};

}  // namespace

const std::error_category& category() {
  static const category_impl instance;
  return instance;
}

std::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

errc errc_from_sqlstate(std::string_view s) {
  if (s == "23505") return errc::unique_violation;
  if (s == "23514") return errc::check_violation;
  if (s == "40001") return errc::serialization_failure;
  if (s == "40P01") return errc::deadlock_detected;
  if (s == "55P03") return errc::lock_not_available;
  if (s == "25006") return errc::read_only;
  if (s == "TL001") return errc::no_synchronous_standby;
  if (s == "42P01" || s == "42703" || s == "42883") return errc::undefined_object;
  if (s.starts_with("57P")) return errc::admin_shutdown;
  if (s.starts_with("08")) return errc::connection_failed;
  return errc::query_failed;
}

bool is_unreplicated_commit_warning(std::string_view severity, std::string_view message) {
  return severity == "WARNING" && (message.starts_with("canceling wait for synchronous replication") ||
                                   message.starts_with("canceling the wait for synchronous replication"));
}

bool is_transient(std::error_code ec) {
  return ec == errc::serialization_failure || ec == errc::deadlock_detected || ec == errc::unique_violation ||
         ec == errc::lock_not_available || ec == errc::read_only;
}

bool is_outcome_unknown(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::timeout || ec == errc::admin_shutdown ||
         ec == errc::commit_not_replicated;
}

}  // namespace tally::pg
