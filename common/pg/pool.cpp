#include "common/pg/pool.hpp"

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tally::pg {

namespace asio = boost::asio;

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    if (owner_ && conn_) owner_->give_back(std::move(conn_));
    owner_ = other.owner_;
    conn_ = std::move(other.conn_);
    other.owner_ = nullptr;
  }
  return *this;
}

lease::~lease() {
  if (owner_ && conn_) owner_->give_back(std::move(conn_));
}

pool::pool(asio::any_io_executor ex, pool_options options) : ex_(ex), options_(std::move(options)) {}

pool::~pool() {
  *alive_ = false;
  for (auto* w : waiters_) w->cancel();
}

void pool::give_back(std::unique_ptr<connection> c) {
  // A connection left inside a transaction (a caller that gave up between
  // BEGIN and its end) is closed, so the server rolls it back; the next
  // caller's BEGIN never lands in it.
  if (!c->is_open() || c->in_transaction()) {
    --open_;  // dropped; a waiter may now open a fresh one
  } else {
    idle_.push_back(std::move(c));
  }
  if (!waiters_.empty()) {
    waiters_.front()->cancel();
    waiters_.pop_front();
  }
}

asio::awaitable<error> pool::async_acquire(lease& out) {
  auto deadline = std::chrono::steady_clock::now() + options_.acquire_timeout;
  auto alive = alive_;
  for (;;) {
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (c->is_open_and_quiet()) {
        out = lease(this, std::move(c));
        co_return error{};
      }
      --open_;
    }
    if (open_ < options_.max_size) {
      ++open_;
      auto c = std::make_unique<connection>(ex_);
      error err = co_await c->async_connect(options_.conninfo, options_.connect_timeout);
      if (!err && !options_.session_sql.empty()) {
        result ignored;
        err = co_await c->async_exec(options_.session_sql, ignored, options_.connect_timeout);
      }
      if (!*alive) co_return error{make_error_code(errc::connection_failed), "", "pool destroyed"};
      if (err) {
        --open_;
        if (!waiters_.empty()) {
          waiters_.front()->cancel();
          waiters_.pop_front();
        }
        co_return err;
      }
      out = lease(this, std::move(c));
      co_return error{};
    }
    if (std::chrono::steady_clock::now() >= deadline)
      co_return error{make_error_code(errc::pool_exhausted), "", "no free connection"};
    asio::steady_timer wait(ex_, deadline);
    waiters_.push_back(&wait);
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive) co_return error{make_error_code(errc::connection_failed), "", "pool destroyed"};
    if (!ec) {  // timed out: we are still queued
      std::erase(waiters_, &wait);
      co_return error{make_error_code(errc::pool_exhausted), "", "no free connection"};
    }
  }
}

}  // namespace tally::pg
