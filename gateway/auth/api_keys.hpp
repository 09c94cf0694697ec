#pragma once
// API keys: each belongs to one tenant and has a role. Only SHA-256 hashes
// of the keys are configured, as one line (a file value or an environment
// variable): `tenant:role:sha256hex;...`. A presented key is hashed and
// compared with every configured hash in constant time, so neither the
// answer's timing nor the log reveals which part matched.
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tally::gateway {

enum class role { app, op };  // `op` is the API's "operator"
std::string_view to_string(role r);

struct principal {
  std::string tenant;
  role r = role::app;
  std::string key_id;  // the first 12 hex digits of the key's hash: a stable name for limits and logs
};

class api_keys {
 public:
  static std::variant<api_keys, std::string> parse(std::string_view spec);
  std::optional<principal> authenticate(std::string_view presented) const;
  std::size_t size() const { return entries_.size(); }

 private:
  struct entry {
    std::string hash;  // 64 lowercase hex digits
    principal who;
  };
  std::vector<entry> entries_;
};

// Whether a role may use a route: everything under /v1/admin/ is for operators.
bool may_use(role r, bool admin_route);

// A browser cannot set Authorization on a WebSocket: it offers the key as a
// subprotocol, `Sec-WebSocket-Protocol: tally.v1, tally.key.<base64url of
// the key, no padding>`, and the server answers `tally.v1`.
inline constexpr std::string_view websocket_protocol = "tally.v1";
// The key in an offered protocol list; nullopt when none is there (or it
// is not base64url).
std::optional<std::string> key_from_websocket_protocols(std::string_view offered);
// Whether the list offers `websocket_protocol`.
bool offers_websocket_protocol(std::string_view offered);

}  // namespace tally::gateway
