#include "relay/sink/push_sink.hpp"

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

namespace tally::relay {

namespace asio = boost::asio;

push_sink::push_sink(asio::any_io_executor ex, std::string name, std::string host, std::uint16_t port,
                     std::string token, std::chrono::milliseconds timeout)
    : name_(std::move(name)), client_(std::move(ex), std::move(host), port), token_(std::move(token)), timeout_(timeout) {}

std::string push_body(const std::string& source, std::span<const outbox_event> events) {
  std::string out = R"({"source":)" + nlohmann::json(source).dump() + R"(,"events":[)";
  bool first = true;
  for (const auto& e : events) {
    if (e.doc.empty()) continue;
    if (!first) out += ',';
    first = false;
    out += nlohmann::json{{"event_id", e.event_id},
                          {"kind", to_string(e.kind)},
                          {"tenant", e.tenant},
                          {"id", e.object_id},
                          {"version", e.version}}
               .dump();
    out.pop_back();  // reopen the object to append the document as it is
    out += R"(,"doc":)";
    out += e.doc;
    out += '}';
  }
  out += "]}";
  return out;
}

asio::awaitable<delivery> push_sink::async_deliver(const std::string& source, std::span<const outbox_event> events) {
  auto r = co_await client_.async_json(boost::beast::http::verb::post, "/internal/events", push_body(source, events),
                                       timeout_, token_);
  if (r.error) co_return delivery{delivery_status::retry, "gateway " + name_ + ": " + r.error.message()};
  if (r.message.result_int() != 200)
    co_return delivery{delivery_status::retry,
                       "gateway " + name_ + " answered " + std::to_string(r.message.result_int())};
  co_return delivery{};
}

}  // namespace tally::relay
