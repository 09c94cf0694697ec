#include "tests/support/ws_client.hpp"

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace tally::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

struct ws_client::impl {
  asio::io_context io;
  websocket::stream<asio::ip::tcp::socket> ws{io};
  beast::flat_buffer buffer;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<std::string> frames;
  bool is_closed = false;
  int status = 0;
  std::string refusal;
  std::string protocol;

  void read_next() {
    ws.async_read(buffer, [this](beast::error_code ec, std::size_t) {
      std::lock_guard lock(mutex);
      if (ec) {
        is_closed = true;
        arrived.notify_all();
        return;
      }
      frames.push_back(beast::buffers_to_string(buffer.data()));
      buffer.consume(buffer.size());
      arrived.notify_all();
      read_next();
    });
  }
};

ws_client::ws_client(std::uint16_t port, const std::string& target, const std::map<std::string, std::string>& headers)
    : impl_(std::make_unique<impl>()) {
  beast::error_code ec;
  beast::get_lowest_layer(impl_->ws).connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return;
  websocket::response_type res;
  impl_->ws.set_option(websocket::stream_base::decorator([&headers](websocket::request_type& req) {
    for (const auto& [k, v] : headers) req.set(k, v);
  }));
  impl_->ws.handshake(res, "127.0.0.1:" + std::to_string(port), target, ec);
  impl_->status = static_cast<int>(res.result_int());
  impl_->protocol = std::string(res[beast::http::field::sec_websocket_protocol]);
  if (ec) {
    impl_->refusal = res.body();
    impl_->is_closed = true;
    return;
  }
  impl_->read_next();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

ws_client::~ws_client() {
  if (impl_->thread.joinable()) {
    asio::post(impl_->io, [this] {
      beast::error_code ec;
      beast::get_lowest_layer(impl_->ws).close(ec);
    });
    impl_->thread.join();
  }
}

int ws_client::status() const { return impl_->status; }
const std::string& ws_client::refusal() const { return impl_->refusal; }
const std::string& ws_client::protocol() const { return impl_->protocol; }

bool ws_client::send(const std::string& text) {
  if (!impl_->thread.joinable()) return false;
  std::promise<bool> done;
  asio::post(impl_->io, [&] {
    impl_->ws.text(true);
    beast::error_code ec;
    impl_->ws.write(asio::buffer(text), ec);  // short frames: a blocking write on the io thread is fine
    done.set_value(!ec);
  });
  return done.get_future().get();
}

std::optional<std::string> ws_client::next(std::chrono::milliseconds deadline) {
  std::unique_lock lock(impl_->mutex);
  impl_->arrived.wait_for(lock, deadline, [&] { return !impl_->frames.empty() || impl_->is_closed; });
  if (impl_->frames.empty()) return std::nullopt;
  auto f = std::move(impl_->frames.front());
  impl_->frames.pop_front();
  return f;
}

bool ws_client::closed() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->is_closed;
}

}  // namespace tally::test
