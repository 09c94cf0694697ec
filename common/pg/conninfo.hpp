#pragma once
// What a connection is opened with: a conninfo (key=value or URI) parsed
// into libpq's keyword/value lists, with the services' session options, and
// split host by host when it names several (a replicated cluster's
// primary and standbys, docs/ha.md).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::pg {

struct connect_params {
  std::vector<std::string> keywords, values;
  std::optional<std::string> value(std::string_view keyword) const;
};

// The conninfo's parameters, with jit = off added to its options (every
// session of the services runs short statements). nullopt: it does not
// parse (the connect then fails with libpq's own message).
std::optional<connect_params> session_params(const std::string& conninfo);

// One parameter set per host, in the conninfo's order: host (and hostaddr)
// split at their commas, port too when it lists one per host. libpq ignores
// connect_timeout when it is polled, so a host that accepts the connection
// but never answers (a stopped server) would hold the whole attempt and the
// hosts after it would never be tried; the caller tries them one by one.
// A conninfo with one host gives one set, unchanged.
std::vector<connect_params> per_host(const connect_params& p);

// The conninfo's connect_timeout (seconds) when set and positive.
std::optional<std::chrono::milliseconds> connect_timeout(const connect_params& p);

}  // namespace tally::pg
