#pragma once
// Where the read projections live in Redis, shared by the relay (writer) and
// the gateway (reader). Each object is a hash {v: version, doc: public JSON}.
// '/' separates tenant and id: ids may contain ':' but never '/', so two
// tenants' keys can never meet.
#include <string>
#include <string_view>

namespace tally::projection {

inline std::string account_key(std::string_view tenant, std::string_view account_id) {
  std::string k = "tally:account:";
  k.append(tenant).append(1, '/').append(account_id);
  return k;
}

inline std::string saga_key(std::string_view tenant, std::string_view saga_id) {
  std::string k = "tally:saga:";
  k.append(tenant).append(1, '/').append(saga_id);
  return k;
}

// Present while a source's projections are complete; gone after Redis was
// flushed or replaced, which makes the relay rebuild them.
inline std::string source_marker(std::string_view source) {
  std::string k = "tally:projection-source:";
  k.append(source);
  return k;
}

// Present while the relay rebuilds a source's projections, holding that
// rebuild's token: gone or changed means Redis was flushed or replaced
// during the rebuild, whose earlier pages went to the lost state.
inline std::string rebuild_key(std::string_view source) {
  std::string k = "tally:projection-rebuild:";
  k.append(source);
  return k;
}

}  // namespace tally::projection
