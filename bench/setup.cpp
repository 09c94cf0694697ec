// Opens and funds the load's accounts through a shard's /v1/batch
// (set_up_accounts in load.hpp).
#include <algorithm>
#include <exception>
#include <memory>
#include <stdexcept>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bench/asio.hpp"
#include "bench/load.hpp"
#include "common/http/client.hpp"

namespace tally::bench {

namespace {

using namespace std::chrono_literals;

// The shard refuses batches over 1000 commands and request bodies over its
// body limit; setup batches stay under both.
constexpr std::size_t batch_max_commands = 1000;
constexpr std::size_t batch_max_bytes = 60'000;
constexpr std::size_t setup_parallelism = 8;
constexpr auto setup_timeout = 60s;

std::vector<std::string> to_batches(const std::vector<std::string>& commands) {
  std::vector<std::string> bodies;
  std::string body;
  std::size_t count = 0;
  for (const auto& c : commands) {
    if (count == batch_max_commands || (count > 0 && body.size() + c.size() + 2 > batch_max_bytes)) {
      bodies.push_back(body + "]}");
      count = 0;
    }
    body = count == 0 ? R"({"commands":[)" + c : body + "," + c;
    ++count;
  }
  if (count > 0) bodies.push_back(body + "]}");
  return bodies;
}

// Sends one setup batch; a 503 or a lost connection is retried, which is
// safe because every setup command has a fixed key.
asio::awaitable<void> send_setup_batch(tally::http::client& client, const endpoint& opt, const std::string& body) {
  auto ex = co_await asio::this_coro::executor;
  std::string last_problem;
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (attempt > 0) {
      asio::steady_timer pause(ex, 200ms * attempt);
      co_await pause.async_wait(asio::use_awaitable);
    }
    std::string target = "/v1/batch";
    std::string copy = body;
    auto r =
        co_await client.async_json(bhttp::verb::post, std::move(target), std::move(copy), setup_timeout, opt.token);
    if (r.error) {
      last_problem = r.error.message();
      continue;
    }
    if (r.message.result_int() == 503) {
      last_problem = "503 " + r.message.body();
      continue;
    }
    if (r.message.result_int() != 200)
      throw std::runtime_error("setup batch answered " + std::to_string(r.message.result_int()) + ": " +
                               r.message.body().substr(0, 300));
    auto j = nlohmann::json::parse(r.message.body());
    bool retry = false;
    for (const auto& result : j.at("results")) {
      auto status = result.at("status").get<std::string>();
      if (status == "succeeded") continue;
      if (status == "unavailable" || status == "retry") {
        retry = true;
        last_problem = result.dump();
        continue;
      }
      throw std::runtime_error("setup command failed: " + result.dump());
    }
    if (!retry) co_return;
  }
  throw std::runtime_error("setup batch kept failing: " + last_problem);
}

// Sends `bodies` over setup_parallelism connections; returns when all are in.
asio::awaitable<void> send_setup_phase(const endpoint& opt, const std::vector<std::string>& bodies) {
  auto ex = co_await asio::this_coro::executor;
  std::size_t next = 0;
  std::size_t running = 0;
  std::exception_ptr failure;
  asio::steady_timer all_done(ex, clock_type::time_point::max());
  auto sender = [&]() -> asio::awaitable<void> {
    tally::http::client client(co_await asio::this_coro::executor, opt.host, opt.port);
    while (next < bodies.size() && !failure) co_await send_setup_batch(client, opt, bodies[next++]);
  };
  for (std::size_t i = 0; i < std::min(setup_parallelism, bodies.size()); ++i) {
    ++running;
    asio::co_spawn(ex, sender, [&](std::exception_ptr e) {
      if (e && !failure) failure = e;
      if (--running == 0) all_done.cancel();
    });
  }
  // The timer serves as a condition variable: the last sender cancels it.
  if (running > 0) {
    auto [ec] = co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
  if (failure) std::rethrow_exception(failure);
}

asio::awaitable<void> wait_until_ready(const endpoint& opt) {
  auto ex = co_await asio::this_coro::executor;
  tally::http::client client(ex, opt.host, opt.port);
  const auto deadline = clock_type::now() + 60s;
  while (true) {
    std::string target = "/readyz";
    auto r = co_await client.async_json(bhttp::verb::get, std::move(target), "", 2s);
    if (!r.error && r.message.result_int() == 200) co_return;
    if (clock_type::now() > deadline) throw std::runtime_error("the service did not become ready within 60 s");
    asio::steady_timer pause(ex, 100ms);
    co_await pause.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> set_up(const endpoint& opt, const std::string& tenant, const std::vector<std::string>& accounts,
                             std::int64_t funding) {
  co_await wait_until_ready(opt);
  std::vector<std::string> opens, credits;
  for (const auto& id : accounts) {
    opens.push_back(R"({"type":"open_account","tenant":")" + tenant + R"(","account_id":")" + id + R"("})");
    credits.push_back(R"({"type":"credit","tenant":")" + tenant + R"(","account_id":")" + id +
                      R"(","biz_id":"bench-funding","amount":)" + std::to_string(funding) + "}");
  }
  // Every open commits before any credit: with per-command commits, parallel
  // workers could otherwise credit an account before it exists.
  auto open_batches = to_batches(opens);
  co_await send_setup_phase(opt, open_batches);
  auto credit_batches = to_batches(credits);
  co_await send_setup_phase(opt, credit_batches);
}

}  // namespace

void set_up_accounts(const endpoint& shard, const std::string& tenant, const std::vector<std::string>& accounts,
                     std::int64_t funding) {
  asio::io_context io(1);
  auto setup = [&]() -> asio::awaitable<void> { co_await set_up(shard, tenant, accounts, funding); };
  asio::co_spawn(io, setup, [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
}

}  // namespace tally::bench
