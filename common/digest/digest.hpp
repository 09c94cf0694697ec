#pragma once
// Message digests (OpenSSL) as lowercase hex: SHA-256 for request hashes,
// migration checksums and API keys; SHA-1 where a protocol names it (Redis
// script ids).
#include <string>
#include <string_view>

namespace tally::digest {

std::string sha256_hex(std::string_view data);
std::string sha1_hex(std::string_view data);

}  // namespace tally::digest
