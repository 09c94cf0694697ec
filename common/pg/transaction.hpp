#pragma once
// The statements that bracket an explicit transaction in a pipeline, the
// guard of a write on a replicated cluster, and a rollback that leaves the
// connection either idle or closed.
#include <chrono>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/pg/connection.hpp"

namespace tally::pg {

inline constexpr std::string_view sql_begin = "BEGIN";
inline constexpr std::string_view sql_commit = "COMMIT";
inline constexpr std::string_view sql_rollback = "ROLLBACK";
// Fails with errc::no_synchronous_standby while a commit would not wait for
// a synchronous standby (migrations: require_synchronous_standby()). Both
// databases' writes run it first when configured to
// (database.require_synchronous_standby; docs/ha.md).
inline constexpr std::string_view sql_require_synchronous_standby = "SELECT require_synchronous_standby()";

// Rolls back whatever transaction is open; a connection whose ROLLBACK fails
// is closed so that the pool replaces it. A no-op on a closed connection.
boost::asio::awaitable<void> async_rollback(connection& conn, std::chrono::milliseconds timeout);

}  // namespace tally::pg
