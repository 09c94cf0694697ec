#include "common/digest/digest.hpp"

#include <openssl/evp.h>

namespace tally::digest {

namespace {

std::string hex_digest(std::string_view data, const EVP_MD* md) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, md, nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace

std::string sha256_hex(std::string_view data) { return hex_digest(data, EVP_sha256()); }
std::string sha1_hex(std::string_view data) { return hex_digest(data, EVP_sha1()); }

}  // namespace tally::digest
