#include "common/redis/client.hpp"

#include <utility>

#include <boost/asio/error.hpp>

#include "common/batching/coalescer.hpp"
#include "common/digest/digest.hpp"

namespace tally::redis {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

script::script(std::string text) : source(std::move(text)), sha1(digest::sha1_hex(source)) {}

struct client::impl {
  impl(asio::any_io_executor ex, client_options o) : options(std::move(o)) {
    for (std::size_t i = 0; i < options.connections; ++i) conns.push_back(std::make_unique<connection>(ex));
    reply closed;
    closed.error = asio::error::operation_aborted;
    queue = std::make_unique<batching::coalescer<command, reply>>(
        ex, options.connections, options.max_batch,
        [this](std::size_t worker, std::vector<command>& cs, std::vector<reply>& rs) { return flush(worker, cs, rs); },
        closed);
  }

  asio::awaitable<void> flush(std::size_t worker, std::vector<command>& commands, std::vector<reply>& replies) {
    auto& conn = *conns[worker];
    if (!conn.is_open()) {
      if (clock::now() < down_until) {
        for (auto& r : replies) r.error = asio::error::connection_refused;
        co_return;
      }
      if (auto ec = co_await conn.async_connect(options.host, options.port, options.connect_timeout)) {
        down_until = clock::now() + options.retry_after;
        reachable = false;
        for (auto& r : replies) r.error = ec;
        co_return;
      }
    }
    auto ec = co_await conn.async_roundtrip(commands, replies, options.timeout);
    reachable = !ec;
  }

  client_options options;
  std::vector<std::unique_ptr<connection>> conns;
  std::unique_ptr<batching::coalescer<command, reply>> queue;
  clock::time_point down_until{};
  bool reachable = false;
};

client::client(asio::any_io_executor ex, client_options options)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(options))) {}
client::~client() = default;

asio::awaitable<reply> client::async_exec(command c) { co_return co_await impl_->queue->async_submit(std::move(c)); }

asio::awaitable<reply> client::async_eval(const script& s, std::vector<std::string> keys,
                                          std::vector<std::string> args) {
  command c;
  c.reserve(3 + keys.size() + args.size());
  c.push_back("EVALSHA");
  c.push_back(s.sha1);
  c.push_back(std::to_string(keys.size()));
  for (auto& k : keys) c.push_back(std::move(k));
  for (auto& a : args) c.push_back(std::move(a));
  auto r = co_await impl_->queue->async_submit(c);
  if (r.error || !r.v.is_error() || !r.v.text.starts_with("NOSCRIPT")) co_return r;
  c[0] = "EVAL";
  c[1] = s.source;
  co_return co_await impl_->queue->async_submit(std::move(c));
}

bool client::reachable() const { return impl_->reachable; }

}  // namespace tally::redis
