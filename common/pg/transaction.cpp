#include "common/pg/transaction.hpp"

namespace tally::pg {

boost::asio::awaitable<void> async_rollback(connection& conn, std::chrono::milliseconds timeout) {
  if (!conn.is_open()) co_return;
  result ignored;
  if (co_await conn.async_exec(sql_rollback, ignored, timeout)) conn.close();
}

}  // namespace tally::pg
