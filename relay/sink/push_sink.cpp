#include "relay/sink/push_sink.hpp"

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

namespace tally::relay {

namespace asio = boost::asio;

namespace {
constexpr std::size_t max_request_bytes = 1024 * 1024;
constexpr std::size_t max_connections = 8;
}  // namespace

push_sink::push_sink(asio::any_io_executor ex, std::string name, std::string host, std::uint16_t port,
                     std::string token, std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      clients_(std::move(ex), std::move(host), port, max_connections),
      token_(std::move(token)),
      timeout_(timeout) {}

std::vector<std::string> push_bodies(const std::string& source, std::span<const outbox_event> events,
                                     std::size_t max_bytes) {
  const std::string head = R"({"source":)" + nlohmann::json(source).dump() + R"(,"events":[)";
  std::vector<std::string> out;
  std::string body;
  for (const auto& e : events) {
    if (e.doc.empty()) continue;
    if (body.size() >= max_bytes) {
      out.push_back(body + "]}");
      body.clear();
    }
    body += body.empty() ? head : ",";
    body += nlohmann::json{{"event_id", e.event_id},
                           {"kind", to_string(e.kind)},
                           {"tenant", e.tenant},
                           {"id", e.object_id},
                           {"version", e.version}}
                .dump();
    body.pop_back();  // reopen the object to append the document as it is
    body += R"(,"doc":)";
    body += e.doc;
    body += '}';
  }
  if (!body.empty()) out.push_back(body + "]}");
  return out;
}

asio::awaitable<delivery> push_sink::async_deliver(const std::string& source, std::span<const outbox_event> events) {
  // Part of a batch may arrive twice when a later request fails: the
  // gateway drops what it has already sent.
  for (auto& body : push_bodies(source, events, max_request_bytes)) {
    http::request req(boost::beast::http::verb::post, "/internal/events", 11);
    req.set(boost::beast::http::field::content_type, "application/json");
    req.set(boost::beast::http::field::authorization, "Bearer " + token_);
    req.body() = std::move(body);
    auto r = co_await clients_.async_request(std::move(req), timeout_);
    if (r.error) co_return delivery{delivery_status::retry, "gateway " + name_ + ": " + r.error.message()};
    if (r.message.result_int() != 200)
      co_return delivery{delivery_status::retry,
                         "gateway " + name_ + " answered " + std::to_string(r.message.result_int())};
  }
  co_return delivery{};
}

}  // namespace tally::relay
