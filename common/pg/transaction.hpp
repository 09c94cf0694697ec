#pragma once
// The statements that bracket an explicit transaction in a pipeline, and a
// rollback that leaves the connection either idle or closed.
#include <chrono>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/pg/connection.hpp"

namespace tally::pg {

inline constexpr std::string_view sql_begin = "BEGIN";
inline constexpr std::string_view sql_commit = "COMMIT";
inline constexpr std::string_view sql_rollback = "ROLLBACK";

// Rolls back whatever transaction is open; a connection whose ROLLBACK fails
// is closed so that the pool replaces it. A no-op on a closed connection.
boost::asio::awaitable<void> async_rollback(connection& conn, std::chrono::milliseconds timeout);

}  // namespace tally::pg
