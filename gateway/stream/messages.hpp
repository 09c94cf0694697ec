#pragma once
// The WebSocket stream's protocol (API.md "WebSocket /v1/stream"), without
// I/O: what a client may send, the frames the server sends, and the filter
// that gives each subscriber every object's states once and in order.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace tally::gateway {

inline constexpr std::size_t max_ids_per_message = 1000;

// {"op": "subscribe" | "unsubscribe", "sagas": [...], "accounts": [...]}
struct subscription_change {
  bool subscribe = true;
  std::vector<std::string> sagas;
  std::vector<std::string> accounts;
};

struct bad_message {
  std::string message;
};

std::variant<subscription_change, bad_message> parse_client_message(std::string_view text);

// Subscription keys: the tenant is part of them, so a subscriber can only
// ever match its own tenant's objects.
std::string account_topic(std::string_view tenant, std::string_view account_id);
std::string saga_topic(std::string_view tenant, std::string_view saga_id);

// {"type": "account", "account": doc}, {"type": "saga", "saga": doc}, with
// the document inserted as it is.
std::string state_frame(bool saga, std::string_view doc);
std::string error_frame(std::string_view code, std::string_view message);
std::string ping_frame();

// The newest version sent per topic: an older or repeated one (a relay
// redelivery, two relays at a handover) is dropped. A resync (the relay's
// rebuild after its source's failover) is sent whatever was sent before,
// and the versions after it count from it.
class version_filter {
 public:
  bool admit(const std::string& topic, std::int64_t version, bool resync = false);
  void forget(const std::string& topic) { last_.erase(topic); }

 private:
  std::unordered_map<std::string, std::int64_t> last_;
};

}  // namespace tally::gateway
