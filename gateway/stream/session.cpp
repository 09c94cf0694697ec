#include "gateway/stream/session.hpp"

#include <deque>
#include <string>
#include <unordered_set>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "common/http/routing.hpp"
#include "common/log/log.hpp"
#include "common/projection/keys.hpp"
#include "gateway/stream/messages.hpp"

namespace tally::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_message_bytes = 64 * 1024;

namespace {

// The key from `Authorization: Bearer <key>`, else from the offered
// subprotocols (browsers), else from ?api_key=.
std::string presented_key(const http::request& req, const http::target& t) {
  const auto auth = req[beast::http::field::authorization];
  if (auth.starts_with("Bearer ")) return std::string(auth.substr(7));
  if (auto key = key_from_websocket_protocols(req[beast::http::field::sec_websocket_protocol])) return std::move(*key);
  return std::string(http::query_param(t.query, "api_key").value_or(""));
}

// Answers an upgrade that is refused like any request, then closes.
void refuse(beast::tcp_stream stream, http::response res) {
  const auto ex = stream.get_executor();
  res.keep_alive(false);
  auto reject = [s = std::make_shared<beast::tcp_stream>(std::move(stream)),
                 res = std::make_shared<http::response>(std::move(res))]() -> asio::awaitable<void> {
    s->expires_after(std::chrono::seconds(5));
    co_await beast::http::async_write(*s, *res, use_tuple);
    s->close();
  };
  asio::co_spawn(ex, reject, asio::detached);
}

}  // namespace

class stream_session : public subscriber, public std::enable_shared_from_this<stream_session> {
 public:
  stream_session(stream_service& svc, beast::tcp_stream stream, principal who)
      : svc_(svc),
        service_alive_(svc.alive_),
        ws_(std::move(stream)),
        who_(std::move(who)),
        wake_(ws_.get_executor()),
        ping_(ws_.get_executor()) {}

  // May run after the service is gone (coroutine frames destroyed with the io_context).
  ~stream_session() override {
    if (!*service_alive_) return;
    for (const auto& t : topics_) svc_.hub_.remove(t, this);
  }

  asio::any_io_executor executor() { return ws_.get_executor(); }

  static asio::awaitable<void> run(std::shared_ptr<stream_session> self, http::request req) {
    auto& ws = self->ws_;
    ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws.read_message_max(max_message_bytes);
    beast::get_lowest_layer(ws).expires_after(self->svc_.options_.handshake_timeout);
    // A browser that offered our subprotocol closes the socket unless it is chosen.
    if (offers_websocket_protocol(req[beast::http::field::sec_websocket_protocol]))
      ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
        res.set(beast::http::field::sec_websocket_protocol, websocket_protocol);
      }));
    auto [accept_ec] = co_await ws.async_accept(req, use_tuple);
    beast::get_lowest_layer(ws).expires_never();
    if (accept_ec) co_return;
    self->svc_.open_.set(static_cast<double>(self->svc_.live_.size()));
    auto writer = [self]() -> asio::awaitable<void> { co_await self->write_loop(); };
    asio::co_spawn(ws.get_executor(), writer, asio::detached);
    auto pinger = [self]() -> asio::awaitable<void> { co_await self->ping_loop(); };
    asio::co_spawn(ws.get_executor(), pinger, asio::detached);
    co_await self->read_loop();
    self->close();
  }

  void deliver(const std::string& topic, std::int64_t version, const std::shared_ptr<const std::string>& frame,
               bool resync) override {
    if (closed_ || !filter_.admit(topic, version, resync)) return;
    enqueue(frame);
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    wake_.cancel();
    ping_.cancel();
    beast::get_lowest_layer(ws_).close();
  }

 private:
  void enqueue(std::shared_ptr<const std::string> frame) {
    if (queue_.size() >= svc_.options_.max_queued_frames) {
      log::warn("stream subscriber too slow; disconnected", {{"tenant", who_.tenant}, {"queued", queue_.size()}});
      svc_.dropped_slow_.inc();
      close();
      return;
    }
    queue_.push_back(std::move(frame));
    wake_.cancel();
  }

  void reply_error(std::string_view code, std::string_view message) {
    enqueue(std::make_shared<const std::string>(error_frame(code, message)));
  }

  asio::awaitable<void> read_loop() {
    beast::flat_buffer buffer;
    while (!closed_) {
      buffer.clear();
      auto [ec, n] = co_await ws_.async_read(buffer, use_tuple);
      if (ec == websocket::error::message_too_big) {
        reply_error("invalid_request", "a message is at most 64 KiB");
        co_return;  // the stream cannot resynchronise after an oversized frame
      }
      if (ec) co_return;
      if (!ws_.got_text()) {
        reply_error("invalid_request", "messages are JSON text frames");
        continue;
      }
      auto parsed = parse_client_message(beast::buffers_to_string(buffer.data()));
      if (auto* bad = std::get_if<bad_message>(&parsed)) {
        reply_error("invalid_request", bad->message);
        continue;
      }
      co_await apply(std::get<subscription_change>(parsed));
    }
  }

  asio::awaitable<void> apply(const subscription_change& c) {
    std::vector<std::pair<std::string, std::string>> added;  // topic, projection key
    std::size_t refused = 0;
    auto change = [&](const std::string& topic, std::string key) {
      if (!c.subscribe) {
        if (topics_.erase(topic) == 1) svc_.hub_.remove(topic, this);
        filter_.forget(topic);
        return;
      }
      if (topics_.contains(topic)) return;
      if (topics_.size() >= svc_.options_.max_subscriptions) {
        ++refused;
        return;
      }
      if (topics_.insert(topic).second) {
        svc_.hub_.add(topic, this);
        added.emplace_back(topic, std::move(key));
      }
    };
    for (const auto& id : c.sagas) change(saga_topic(who_.tenant, id), projection::saga_key(who_.tenant, id));
    for (const auto& id : c.accounts) change(account_topic(who_.tenant, id), projection::account_key(who_.tenant, id));
    if (refused > 0)
      reply_error("invalid_request", "at most " + std::to_string(svc_.options_.max_subscriptions) +
                                         " subscriptions per connection; " + std::to_string(refused) + " refused");
    // The current state first, so nothing between reading and subscribing is missed.
    for (const auto& [topic, key] : added) {
      auto r = co_await svc_.redis_.async_exec(redis::make_command("HMGET", key, "v", "doc"));
      if (closed_ || !r.ok() || r.v.elements.size() != 2 || r.v.elements[1].type != redis::value::kind::string)
        continue;
      const auto version = std::stoll(r.v.elements[0].text);
      deliver(topic, version,
              std::make_shared<const std::string>(state_frame(topic.starts_with("saga:"), r.v.elements[1].text)),
              false);
    }
  }

  asio::awaitable<void> write_loop() {
    auto self = shared_from_this();
    while (!closed_) {
      if (queue_.empty()) {
        wake_.expires_at(asio::steady_timer::time_point::max());
        co_await wake_.async_wait(use_tuple);
        continue;
      }
      auto frame = std::move(queue_.front());
      queue_.pop_front();
      ws_.text(true);
      auto [ec, n] = co_await ws_.async_write(asio::buffer(*frame), use_tuple);
      if (ec) {
        close();
        co_return;
      }
      svc_.frames_.inc();
    }
  }

  asio::awaitable<void> ping_loop() {
    auto self = shared_from_this();
    const auto frame = std::make_shared<const std::string>(ping_frame());
    while (!closed_) {
      ping_.expires_after(svc_.options_.ping_interval);
      auto [ec] = co_await ping_.async_wait(use_tuple);
      if (ec || closed_) co_return;
      enqueue(frame);
    }
  }

  stream_service& svc_;
  std::shared_ptr<bool> service_alive_;
  websocket::stream<beast::tcp_stream> ws_;
  principal who_;
  asio::steady_timer wake_;  // a condition variable for the writer
  asio::steady_timer ping_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  std::unordered_set<std::string> topics_;
  version_filter filter_;
  bool closed_ = false;
};

stream_service::stream_service(hub& h, const api_keys& keys, redis::client& redis, metrics::registry& metrics,
                               stream_options options)
    : hub_(h),
      keys_(keys),
      redis_(redis),
      options_(options),
      open_(metrics.add_gauge("tally_gateway_stream_sessions", "Open WebSocket subscribers")),
      frames_(metrics.add_counter("tally_gateway_stream_frames_total", "Frames sent to WebSocket subscribers")),
      dropped_slow_(metrics.add_counter("tally_gateway_stream_slow_disconnects_total",
                                        "Subscribers disconnected for falling too far behind")) {}

stream_service::~stream_service() {
  *alive_ = false;
  close_all();
}

void stream_service::accept(beast::tcp_stream stream, http::request req) {
  const auto ex = stream.get_executor();
  const auto t = http::split_target(std::string_view(req.target().data(), req.target().size()));
  if (t.path != std::vector<std::string>{"v1", "stream"})
    return refuse(std::move(stream), http::make_error_response(req, contract::error_code::not_found, "no such route"));
  auto who = keys_.authenticate(presented_key(req, t));
  if (!who)
    return refuse(std::move(stream),
                  http::make_error_response(req, contract::error_code::unauthorized, "missing or unknown API key"));
  std::erase_if(live_, [](const auto& w) { return w.expired(); });
  auto session = std::make_shared<stream_session>(*this, std::move(stream), std::move(*who));
  live_.push_back(session);
  auto body = [session, req = std::move(req)]() mutable -> asio::awaitable<void> {
    co_await stream_session::run(session, std::move(req));
  };
  asio::co_spawn(ex, std::move(body), [this](std::exception_ptr) {
    std::erase_if(live_, [](const auto& w) { return w.expired(); });
    open_.set(static_cast<double>(live_.size()));
  });
}

void stream_service::close_all() {
  for (auto& w : live_)
    if (auto s = w.lock()) s->close();
}

}  // namespace tally::gateway
