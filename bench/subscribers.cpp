#include "bench/subscribers.hpp"

#include <future>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

namespace tally::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct subscribers::impl {
  asio::io_context io;
  std::thread thread;
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> settled{0};
  std::atomic<std::uint64_t> frames{0};
  std::vector<std::shared_ptr<websocket::stream<beast::tcp_stream>>> streams;

  asio::awaitable<void> one(std::shared_ptr<websocket::stream<beast::tcp_stream>> ws, std::uint16_t port,
                            std::string api_key, std::string subscribe) {
    auto& tcp = beast::get_lowest_layer(*ws);
    tcp.expires_after(std::chrono::seconds(10));
    auto [connect_ec] = co_await tcp.async_connect({asio::ip::make_address("127.0.0.1"), port}, use_tuple);
    if (!connect_ec) {
      ws->set_option(websocket::stream_base::decorator([api_key](websocket::request_type& req) {
        req.set(beast::http::field::authorization, "Bearer " + api_key);
      }));
      auto [handshake_ec] = co_await ws->async_handshake("127.0.0.1", "/v1/stream", use_tuple);
      if (!handshake_ec) {
        auto [write_ec, n] = co_await ws->async_write(asio::buffer(subscribe), use_tuple);
        if (!write_ec) {
          ++open;
          ++settled;
          tcp.expires_never();
          beast::flat_buffer buffer;
          for (;;) {
            auto [read_ec, m] = co_await ws->async_read(buffer, use_tuple);
            if (read_ec) break;
            buffer.consume(buffer.size());
            frames.fetch_add(1, std::memory_order_relaxed);
          }
          --open;
          co_return;
        }
      }
    }
    ++settled;
  }
};

subscribers::subscribers(std::uint16_t port, const std::string& api_key, std::size_t count,
                         const std::vector<std::string>& accounts, std::size_t per)
    : impl_(std::make_unique<impl>()) {
  for (std::size_t i = 0; i < count; ++i) {
    nlohmann::json ids = nlohmann::json::array();
    for (std::size_t k = 0; k < per && !accounts.empty(); ++k) ids.push_back(accounts[(i * per + k) % accounts.size()]);
    const auto subscribe = nlohmann::json{{"op", "subscribe"}, {"accounts", ids}}.dump();
    auto ws = std::make_shared<websocket::stream<beast::tcp_stream>>(impl_->io);
    impl_->streams.push_back(ws);
    auto run = [this, ws, port, api_key, subscribe]() -> asio::awaitable<void> {
      co_await impl_->one(ws, port, api_key, subscribe);
    };
    asio::co_spawn(impl_->io, run, asio::detached);
  }
  impl_->thread = std::thread([this] { impl_->io.run(); });
  while (impl_->settled.load() < count) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

subscribers::~subscribers() {
  asio::post(impl_->io, [this] {
    for (auto& ws : impl_->streams) beast::get_lowest_layer(*ws).close();
  });
  impl_->thread.join();
}

std::size_t subscribers::open() const { return impl_->open.load(); }
std::uint64_t subscribers::frames() const { return impl_->frames.load(); }

}  // namespace tally::bench
