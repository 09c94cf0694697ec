#include "common/pg/connection.hpp"

#include <libpq-fe.h>
#include <unistd.h>

#include <charconv>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/asio/idle_socket.hpp"
#include "common/pg/conninfo.hpp"

namespace tally::pg {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

// ---- result ----

result::result(pg_result* r) : res_(r, &PQclear) {}
int result::rows() const { return res_ ? PQntuples(res_.get()) : 0; }
int result::columns() const { return res_ ? PQnfields(res_.get()) : 0; }
bool result::is_null(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
std::string_view result::text(int row, int col) const {
  return {PQgetvalue(res_.get(), row, col), static_cast<std::size_t>(PQgetlength(res_.get(), row, col))};
}
std::int64_t result::int64(int row, int col) const {
  auto t = text(row, col);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) throw std::runtime_error("not an integer: " + std::string(t));
  return v;
}
std::optional<std::int64_t> result::opt_int64(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return int64(row, col);
}
bool result::boolean(int row, int col) const { return text(row, col) == "t"; }
std::int64_t result::affected_rows() const {
  const char* n = res_ ? PQcmdTuples(res_.get()) : "";
  std::int64_t v = 0;
  std::from_chars(n, n + std::char_traits<char>::length(n), v);
  return v;
}

// ---- array literals ----

namespace {
void append_quoted(std::string& out, std::string_view item) {
  out += '"';
  for (char c : item) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

template <class Text>
std::string text_array(std::span<const Text> items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    append_quoted(out, items[i]);
  }
  return out += '}';
}
}  // namespace

std::string array_literal(std::span<const std::string> items) { return text_array(items); }
std::string array_literal(std::span<const std::string_view> items) { return text_array(items); }

std::string array_literal(std::span<const std::int64_t> items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(items[i]);
  }
  return out += '}';
}

std::string array_literal(std::span<const param> items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    if (items[i])
      append_quoted(out, *items[i]);
    else
      out += "NULL";
  }
  return out += '}';
}

// ---- connection ----

connection::connection(asio::any_io_executor ex) : ex_(ex), deadline_(ex) {}

connection::~connection() { close(); }

bool connection::is_open() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

bool connection::is_open_and_quiet() const { return is_open() && net::idle_socket_usable(PQsocket(conn_)); }

bool connection::in_transaction() const { return conn_ != nullptr && PQtransactionStatus(conn_) != PQTRANS_IDLE; }

void connection::close() {
  if (socket_) {
    socket_->cancel();
    socket_->release();  // libpq owns the descriptor
    socket_.reset();
  }
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  prepared_.clear();
  deadline_.cancel();
}

void connection::interrupt() {
  if (socket_) socket_->cancel();
}

error connection::fail(errc code, std::string message) {
  close();
  return error{make_error_code(code), "", std::move(message)};
}

void connection::on_notice(void* self, const PGresult* notice) {
  const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  const char* message = PQresultErrorField(notice, PG_DIAG_MESSAGE_PRIMARY);
  if (severity != nullptr && message != nullptr && is_unreplicated_commit_warning(severity, message))
    static_cast<connection*>(self)->commit_not_replicated_ = true;
}

void connection::attach_socket(bool renew) {
  int fd = PQsocket(conn_);
  if (socket_ && socket_->native_handle() == fd && !renew) return;
  if (socket_) socket_->release();
  socket_ = std::make_unique<asio::posix::stream_descriptor>(ex_, fd);
}

void connection::arm_deadline(std::chrono::milliseconds timeout) {
  timed_out_ = false;
  deadline_.expires_after(timeout);
  // The generation guards against an expiry queued just before a new
  // operation re-armed the timer.
  deadline_.async_wait([this, gen = ++deadline_generation_](boost::system::error_code ec) {
    if (ec || gen != deadline_generation_) return;
    timed_out_ = true;
    if (socket_) socket_->cancel();
  });
}

awaitable<std::error_code> connection::async_wait(wait_for what) {
  using namespace asio::experimental::awaitable_operators;
  boost::system::error_code ec;
  if (what == wait_for::read) {
    co_await socket_->async_wait(asio::posix::descriptor_base::wait_read, asio::redirect_error(use_awaitable, ec));
  } else if (what == wait_for::write) {
    co_await socket_->async_wait(asio::posix::descriptor_base::wait_write, asio::redirect_error(use_awaitable, ec));
  } else {
    // While a large pipeline is being flushed the server may already answer;
    // libpq must read then, or both sides block on full buffers.
    try {
      co_await (socket_->async_wait(asio::posix::descriptor_base::wait_read, use_awaitable) ||
                socket_->async_wait(asio::posix::descriptor_base::wait_write, use_awaitable));
    } catch (const boost::system::system_error& e) {
      ec = e.code();
    }
  }
  if (timed_out_) co_return make_error_code(errc::timeout);
  if (ec) co_return make_error_code(errc::connection_lost);
  co_return std::error_code{};
}

awaitable<error> connection::async_connect(std::string conninfo, std::chrono::milliseconds timeout) {
  auto params = session_params(conninfo);
  if (!params) {
    close();
    conn_ = PQconnectStart(conninfo.c_str());
    co_return co_await async_poll_connect(timeout);
  }
  // Host by host, each with its own time (the conninfo's connect_timeout
  // when shorter), from the one that took the last connection of this
  // conninfo on this thread: after a failover that is the new primary.
  thread_local std::unordered_map<std::string, std::size_t> last_good_host;
  const auto hosts = per_host(*params);
  const auto each = std::min(timeout, connect_timeout(*params).value_or(timeout));
  auto& first = last_good_host[conninfo];
  error last;
  for (std::size_t k = 0; k < hosts.size(); ++k) {
    const auto i = (first + k) % hosts.size();
    if (!(last = co_await async_connect_to(hosts[i], hosts.size() == 1 ? timeout : each))) {
      first = i;
      co_return last;
    }
  }
  co_return last;
}

awaitable<error> connection::async_connect_to(const connect_params& params, std::chrono::milliseconds timeout) {
  close();
  std::vector<const char*> keywords, values;
  for (std::size_t i = 0; i < params.keywords.size(); ++i) {
    keywords.push_back(params.keywords[i].c_str());
    values.push_back(params.values[i].c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectStartParams(keywords.data(), values.data(), 0);
  co_return co_await async_poll_connect(timeout);
}

awaitable<error> connection::async_poll_connect(std::chrono::milliseconds timeout) {
  if (conn_ == nullptr) co_return fail(errc::connection_failed, "out of memory");
  if (PQstatus(conn_) == CONNECTION_BAD) co_return fail(errc::connection_failed, PQerrorMessage(conn_));
  arm_deadline(timeout);
  PostgresPollingStatusType poll = PGRES_POLLING_WRITING;
  while (poll != PGRES_POLLING_OK) {
    if (poll == PGRES_POLLING_FAILED) {
      deadline_.cancel();
      co_return fail(errc::connection_failed, PQerrorMessage(conn_));
    }
    // While it tries addresses libpq may close its socket and open another,
    // which may get the same number: registered anew each time, or the
    // reactor would wait on a socket that is gone.
    attach_socket(true);
    auto ec = co_await async_wait(poll == PGRES_POLLING_READING ? wait_for::read : wait_for::write);
    if (ec) {
      deadline_.cancel();
      co_return fail(ec == errc::timeout ? errc::timeout : errc::connection_failed, "connect: " + ec.message());
    }
    poll = PQconnectPoll(conn_);
  }
  deadline_.cancel();
  attach_socket();
  PQsetNoticeReceiver(conn_, &connection::on_notice, this);
  if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1)
    co_return fail(errc::connection_failed, PQerrorMessage(conn_));
  co_return error{};
}

awaitable<error> connection::async_flush() {
  for (;;) {
    int r = PQflush(conn_);
    if (r == 0) co_return error{};
    if (r < 0) co_return fail(errc::connection_lost, PQerrorMessage(conn_));
    if (auto ec = co_await async_wait(wait_for::either))
      co_return fail(static_cast<errc>(ec.value()), "flush: " + ec.message());
    if (PQconsumeInput(conn_) == 0) co_return fail(errc::connection_lost, PQerrorMessage(conn_));
  }
}

awaitable<error> connection::async_read_results(std::size_t expected, std::vector<result>& out) {
  commit_not_replicated_ = false;
  error first;
  std::size_t index = 0;  // statement whose results are being read
  bool got_result = false;
  for (;;) {
    while (PQisBusy(conn_)) {
      if (auto ec = co_await async_wait(wait_for::read))
        co_return fail(static_cast<errc>(ec.value()), "read: " + ec.message());
      if (PQconsumeInput(conn_) == 0) co_return fail(errc::connection_lost, PQerrorMessage(conn_));
    }
    PGresult* raw = PQgetResult(conn_);
    if (raw == nullptr) {  // end of one statement's results
      if (got_result) ++index;
      got_result = false;
      continue;
    }
    result r(raw);
    ExecStatusType status = PQresultStatus(raw);
    if (status == PGRES_PIPELINE_SYNC) break;
    got_result = true;
    if (status == PGRES_FATAL_ERROR && !first) {
      const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
      const char* msg = PQresultErrorMessage(raw);
      first = error{make_error_code(errc_from_sqlstate(state ? state : "")), state ? state : "", msg ? msg : ""};
    } else if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      if (!first && index < expected) out.push_back(std::move(r));
    }
  }
  // The pipeline's transaction committed on this server only: reported as
  // the outcome-unknown it is, and the connection goes (a primary whose
  // standbys do not answer may be on its way out).
  if (commit_not_replicated_ && !first)
    co_return fail(errc::commit_not_replicated, "the commit was not confirmed by a synchronous standby");
  // A write refused because this server is a standby (one demoted under an
  // open connection, or reached by a conninfo that allows any node): the
  // connection goes, so the next one looks for the primary again.
  if (first.code == errc::read_only) close();
  co_return first;
}

awaitable<error> connection::async_pipeline(std::span<const statement> statements, std::vector<result>& out,
                                            std::chrono::milliseconds timeout) {
  out.clear();
  if (!is_open()) co_return fail(errc::connection_lost, "not connected");
  // Prepared statements: each SQL text is prepared once per connection, in
  // the same pipeline as its first execution. The prepare results are read
  // and dropped like any other; `expected` counts only the executions.
  std::vector<const char*> values;
  std::vector<std::string> newly_prepared;
  for (const auto& st : statements) {
    auto it = prepared_.find(st.sql);
    if (it == prepared_.end()) {
      std::string name = "s" + std::to_string(++statements_named_);  // names are never reused
      std::string sql(st.sql);
      if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(st.params.size()), nullptr) != 1)
        co_return fail(errc::connection_lost, PQerrorMessage(conn_));
      it = prepared_.emplace(std::move(sql), std::move(name)).first;
      newly_prepared.push_back(it->first);
    }
    values.clear();
    for (const auto& p : st.params) values.push_back(p ? p->c_str() : nullptr);
    if (PQsendQueryPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr,
                            0) != 1)
      co_return fail(errc::connection_lost, PQerrorMessage(conn_));
  }
  if (PQpipelineSync(conn_) != 1) co_return fail(errc::connection_lost, PQerrorMessage(conn_));
  arm_deadline(timeout);
  error err = co_await async_flush();
  if (!err) {
    // Prepare results come first for each new statement; skip them by
    // reading into a scratch vector and keeping only execution results.
    std::vector<result> all;
    err = co_await async_read_results(statements.size() + newly_prepared.size(), all);
    if (newly_prepared.empty()) {
      out = std::move(all);
    } else {
      std::size_t k = 0;
      std::size_t np = 0;
      for (const auto& st : statements) {
        bool was_new = np < newly_prepared.size() && newly_prepared[np] == st.sql;
        if (was_new) {
          ++np;
          ++k;  // the prepare's own result
        }
        if (k >= all.size()) break;
        out.push_back(std::move(all[k++]));
      }
    }
  }
  deadline_.cancel();
  if (err && is_open()) {
    // A failed pipeline may have skipped some prepares: forget them all.
    for (const auto& sql : newly_prepared) prepared_.erase(sql);
  }
  co_return err;
}

awaitable<error> connection::async_exec(std::string_view sql, std::vector<param> params, result& out,
                                        std::chrono::milliseconds timeout) {
  statement st{sql, std::move(params)};
  std::vector<result> results;
  error err = co_await async_pipeline(std::span<const statement>(&st, 1), results, timeout);
  if (!err && !results.empty()) out = std::move(results.front());
  co_return err;
}

awaitable<error> connection::async_exec(std::string_view sql, result& out, std::chrono::milliseconds timeout) {
  co_return co_await async_exec(sql, std::vector<param>{}, out, timeout);
}

awaitable<error> connection::async_notifications(std::vector<notification>& out) {
  out.clear();
  if (!is_open()) co_return fail(errc::connection_lost, "not connected");
  for (;;) {
    if (PQconsumeInput(conn_) == 0) co_return fail(errc::connection_lost, PQerrorMessage(conn_));
    while (PGnotify* n = PQnotifies(conn_)) {
      out.push_back({n->relname, n->extra});
      PQfreemem(n);
    }
    if (!out.empty()) co_return error{};
    if (auto ec = co_await async_wait(wait_for::read))
      co_return fail(static_cast<errc>(ec.value()), "notifications: " + ec.message());
  }
}

}  // namespace tally::pg
