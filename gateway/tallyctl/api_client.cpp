#include "gateway/tallyctl/api_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/url/parse.hpp>

#include "common/http/client.hpp"

namespace tally::ctl {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using nlohmann::json;

std::optional<endpoint> parse_url(std::string_view url) {
  auto u = boost::urls::parse_absolute_uri(url);
  if (!u || u->scheme() != "http" || u->host().empty() || u->has_query() || u->has_fragment()) return std::nullopt;
  if (!u->path().empty() && u->path() != "/") return std::nullopt;
  endpoint e{std::string(u->host()), 80};
  if (u->has_port()) {
    if (u->port_number() == 0) return std::nullopt;
    e.port = u->port_number();
  }
  return e;
}

api_reply api_client::call(const std::string& method, const std::string& target, std::string body) const {
  asio::io_context io;
  http::client c(io.get_executor(), at_.host, at_.port);
  auto done = asio::co_spawn(
      io, c.async_json(beast::http::string_to_verb(method), target, std::move(body), timeout_, key_), asio::use_future);
  io.run();
  auto r = done.get();
  api_reply out;
  if (r.error) {
    out.transport = r.error.message();
    return out;
  }
  out.status = static_cast<int>(r.message.result_int());
  out.body = json::parse(r.message.body(), nullptr, false);
  if (out.body.is_discarded()) out.body = json(r.message.body());
  return out;
}

api_reply api_client::get(const std::string& target) const { return call("GET", target, ""); }
api_reply api_client::post(const std::string& target, const json& body) const {
  return call("POST", target, body.dump());
}

bool api_client::watch_saga(const std::string& saga_id, const std::function<bool(const json&)>& each,
                            std::string& why) const {
  asio::io_context io;
  websocket::stream<asio::ip::tcp::socket> ws(io);
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto found = resolver.resolve(at_.host, std::to_string(at_.port), ec);
  if (!ec) asio::connect(ws.next_layer(), found, ec);
  if (ec) {
    why = "cannot reach the gateway: " + ec.message();
    return false;
  }
  ws.set_option(websocket::stream_base::decorator(
      [this](websocket::request_type& req) { req.set(beast::http::field::authorization, "Bearer " + key_); }));
  websocket::response_type res;
  ws.handshake(res, at_.host, "/v1/stream", ec);
  if (ec) {
    why = "the stream refused: HTTP " + std::to_string(res.result_int()) + " " + res.body();
    return false;
  }
  ws.write(asio::buffer(json{{"op", "subscribe"}, {"sagas", {saga_id}}}.dump()), ec);
  beast::flat_buffer buffer;
  for (bool more = !ec && each(json()); more && !ec;) {
    buffer.clear();
    ws.read(buffer, ec);
    if (ec) break;
    auto frame = json::parse(beast::buffers_to_string(buffer.data()), nullptr, false);
    if (frame.is_object()) more = each(frame);
    if (!more) {
      ws.close(websocket::close_code::normal, ec);
      return true;
    }
  }
  why = "the stream closed: " + ec.message();
  return false;
}

}  // namespace tally::ctl
