#pragma once
// The part of main() every service shares: configuration (file, then
// environment PREFIX_*, then --key=value), JSON logs at log.level,
// failpoints armed from TALLY_FAILPOINTS, one io_context thread, and a
// graceful stop on SIGTERM or SIGINT.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/config/config.hpp"

namespace tally::service {

class app;
// Builds the service from its configuration; nullptr when the command
// needed no serving (a `migrate` subcommand that is done). May throw: the
// message is logged as fatal and the process exits 1.
using make_app = std::function<std::unique_ptr<app>(boost::asio::io_context&, const config::config&)>;

class app {
 public:
  virtual ~app() = default;
  // Starts serving. An exception ends the process with a fatal log line.
  virtual boost::asio::awaitable<void> async_start() = 0;
  // On SIGTERM or SIGINT: finish what is in flight. The io_context stops
  // when it returns, and the process exits 0.
  virtual boost::asio::awaitable<void> async_stop() = 0;
  // From SIGTERM or SIGINT on (set before async_stop): a stopping service
  // is not ready.
  bool stopping() const { return stopping_; }

 private:
  friend int run(std::string_view name, std::string env_prefix, int argc, char** argv, const make_app& make);
  bool stopping_ = false;
};

int run(std::string_view name, std::string env_prefix, int argc, char** argv, const make_app& make);

// For a service with a database of its own: applies the pending
// migrations (migrate.hpp, waiting for the database). Returns true when
// that is all argv asks (the `migrate` subcommand): nothing is to be served.
bool apply_migrations(int argc, char** argv, const std::string& conninfo, const std::filesystem::path& migrations_dir);

}  // namespace tally::service
