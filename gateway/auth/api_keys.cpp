#include "gateway/auth/api_keys.hpp"

#include <openssl/crypto.h>

#include <algorithm>

#include "common/digest/digest.hpp"
#include "common/validate/fields.hpp"

namespace tally::gateway {

std::string_view to_string(role r) { return r == role::app ? "app" : "operator"; }

namespace {

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
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
    out.entries_.push_back({std::string(hash), {std::string(tenant), name == "app" ? role::app : role::op,
                                                std::string(hash.substr(0, 12))}});
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

}  // namespace tally::gateway
