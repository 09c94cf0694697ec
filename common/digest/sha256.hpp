#pragma once
// SHA-256 (OpenSSL) as lowercase hex: request hashes, migration checksums.
#include <string>
#include <string_view>

namespace tally::digest {

std::string sha256_hex(std::string_view data);

}  // namespace tally::digest
