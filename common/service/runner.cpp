#include "common/service/runner.hpp"

#include <csignal>
#include <exception>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/failpoint/failpoint.hpp"
#include "common/log/log.hpp"
#include "common/migrate/migrate.hpp"

namespace tally::service {

namespace asio = boost::asio;

bool apply_migrations(int argc, char** argv, const std::string& conninfo, const std::filesystem::path& migrations_dir) {
  migrate::apply_when_reachable(conninfo, migrations_dir);
  return argc > 1 && std::string_view(argv[1]) == "migrate";
}

int run(std::string_view name, std::string env_prefix, int argc, char** argv, const make_app& make) {
  try {
    auto cfg = config::config::from_args(std::move(env_prefix), argc, argv);
    log::init(name, log::parse_level(cfg.get_string("log.level", "info")));
    failpoint::arm_from_env();
    asio::io_context io(1);
    auto a = make(io, cfg);
    if (!a) return 0;
    asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      auto stop = [&]() -> asio::awaitable<void> {
        a->stopping_ = true;
        co_await a->async_stop();
        io.stop();
      };
      asio::co_spawn(io, stop, log::exit_on_failure);
    });
    auto start = [&]() -> asio::awaitable<void> { co_await a->async_start(); };
    asio::co_spawn(io, start, log::exit_on_failure);
    io.run();
    return 0;
  } catch (const std::exception& e) {
    log::fatal(name, e.what());
    return 1;
  }
}

}  // namespace tally::service
