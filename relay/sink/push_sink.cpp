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

namespace {

// One pushed object: {"event_id" (an event's only), "kind", "tenant", "id",
// "version", "doc"}, the document inserted as it is.
std::string push_item(const std::string* event_id, object_kind kind, const std::string& tenant, const std::string& id,
                      std::int64_t version, const std::string& doc) {
  nlohmann::json head{{"kind", to_string(kind)}, {"tenant", tenant}, {"id", id}, {"version", version}};
  if (event_id) head["event_id"] = *event_id;
  auto item = head.dump();
  item.pop_back();  // reopen the object to append the document as it is
  item += R"(,"doc":)";
  item += doc;
  item += '}';
  return item;
}

// Appends items to bodies opened by `head`, a new body once one reaches `max_bytes`.
class body_splitter {
 public:
  body_splitter(std::string head, std::size_t max_bytes) : head_(std::move(head)), max_bytes_(max_bytes) {}
  void add(const std::string& item) {
    if (body_.size() >= max_bytes_) {
      out_.push_back(body_ + "]}");
      body_.clear();
    }
    body_ += body_.empty() ? head_ : ",";
    body_ += item;
  }
  std::vector<std::string> finish() {
    if (!body_.empty()) out_.push_back(body_ + "]}");
    return std::move(out_);
  }

 private:
  std::string head_;
  std::size_t max_bytes_;
  std::string body_;
  std::vector<std::string> out_;
};

std::string source_head(const std::string& source) { return R"({"source":)" + nlohmann::json(source).dump(); }

}  // namespace

std::vector<std::string> push_bodies(const std::string& source, std::span<const outbox_event> events,
                                     std::size_t max_bytes) {
  body_splitter bodies(source_head(source) + R"(,"events":[)", max_bytes);
  for (const auto& e : events)
    if (!e.doc.empty()) bodies.add(push_item(&e.event_id, e.kind, e.tenant, e.object_id, e.version, e.doc));
  return bodies.finish();
}

std::vector<std::string> resync_bodies(const std::string& source, std::span<const object_state> states,
                                       std::size_t max_bytes) {
  body_splitter bodies(source_head(source) + R"(,"resync":true,"events":[)", max_bytes);
  for (const auto& s : states) bodies.add(push_item(nullptr, s.kind, s.tenant, s.object_id, s.version, s.doc));
  return bodies.finish();
}

asio::awaitable<delivery> push_sink::async_post(std::vector<std::string> bodies) {
  // Part of a batch may arrive twice when a later request fails: the
  // gateway drops what it has already sent.
  for (auto& body : bodies) {
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

asio::awaitable<delivery> push_sink::async_deliver(const std::string& source, std::span<const outbox_event> events) {
  co_return co_await async_post(push_bodies(source, events, max_request_bytes));
}

// After the source's failover, the rebuild's pages: the gateway sends each
// subscribed object's current state whatever version it sent before.
asio::awaitable<delivery> push_sink::async_restore(const std::string& source, std::span<const object_state> states) {
  co_return co_await async_post(resync_bodies(source, states, max_request_bytes));
}

}  // namespace tally::relay
