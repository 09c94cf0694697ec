#include "gateway/auth/api_keys.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

#include "common/digest/digest.hpp"
#include "common/validate/fields.hpp"

namespace tally::gateway {

std::string_view to_string(role r) { return r == role::app ? "app" : "operator"; }

namespace {

bool is_hex64(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::variant<api_keys, std::string> api_keys::parse(std::string_view spec) {
  api_keys out;
  while (!spec.empty()) {
    const auto end = spec.find(';');
    auto item = spec.substr(0, end);
    spec = end == std::string_view::npos ? std::string_view() : spec.substr(end + 1);
    if (item.empty()) continue;
    const auto a = item.find(':'), b = item.find(':', a == std::string_view::npos ? a : a + 1);
    if (a == std::string_view::npos || b == std::string_view::npos)
      return "api key entries are tenant:role:sha256hex, got one with " + std::to_string(item.size()) + " characters";
    const auto tenant = item.substr(0, a), name = item.substr(a + 1, b - a - 1), hash = item.substr(b + 1);
    if (!validate::is_valid_id(tenant)) return "api key entry with a bad tenant id";
    if (name != "app" && name != "operator") return "api key role must be app or operator";
    if (!is_hex64(hash)) return "api key hash must be 64 lowercase hex digits (SHA-256 of the key)";
    for (const auto& e : out.entries_)
      if (e.hash == hash) return "the same api key hash is configured twice";
    out.entries_.push_back(
        {std::string(hash),
         {std::string(tenant), name == "app" ? role::app : role::op, std::string(hash.substr(0, 12))}});
  }
  if (out.entries_.empty()) return std::string("no api keys configured");
  return out;
}

std::optional<principal> api_keys::authenticate(std::string_view presented) const {
  if (presented.empty()) return std::nullopt;
  const auto hash = digest::sha256_hex(presented);
  const entry* found = nullptr;
  for (const auto& e : entries_) {  // every entry, whatever matched
    if (CRYPTO_memcmp(e.hash.data(), hash.data(), hash.size()) == 0) found = &e;
  }
  if (!found) return std::nullopt;
  return found->who;
}

bool may_use(role r, bool admin_route) { return r == role::op || !admin_route; }

namespace {

constexpr std::string_view key_protocol_prefix = "tally.key.";

// Calls `each` with every protocol of a comma-separated list, trimmed, until it returns true.
template <class F>
bool any_protocol(std::string_view offered, F each) {
  for (std::size_t from = 0; from <= offered.size();) {
    const auto comma = std::min(offered.find(',', from), offered.size());
    auto p = offered.substr(from, comma - from);
    while (!p.empty() && (p.front() == ' ' || p.front() == '\t')) p.remove_prefix(1);
    while (!p.empty() && (p.back() == ' ' || p.back() == '\t')) p.remove_suffix(1);
    if (each(p)) return true;
    from = comma + 1;
  }
  return false;
}

// base64url without padding (RFC 4648 §5), by OpenSSL's decoder.
std::optional<std::string> from_base64url(std::string_view text) {
  if (text.empty() || text.size() % 4 == 1) return std::nullopt;
  std::string b64(text);
  for (auto& ch : b64) {
    if (ch == '-')
      ch = '+';
    else if (ch == '_')
      ch = '/';
    else if (ch == '+' || ch == '/' || ch == '=')
      return std::nullopt;
  }
  const std::size_t padding = (4 - b64.size() % 4) % 4;
  b64.append(padding, '=');
  std::string out(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

}  // namespace

std::optional<std::string> key_from_websocket_protocols(std::string_view offered) {
  std::optional<std::string> key;
  any_protocol(offered, [&](std::string_view p) {
    if (!p.starts_with(key_protocol_prefix)) return false;
    key = from_base64url(p.substr(key_protocol_prefix.size()));
    return true;
  });
  return key;
}

bool offers_websocket_protocol(std::string_view offered) {
  return any_protocol(offered, [](std::string_view p) { return p == websocket_protocol; });
}

}  // namespace tally::gateway
