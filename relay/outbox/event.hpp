#pragma once
// What the relay reads and delivers: the outbox events of one source (a
// shard's database or the orchestrator's), their commit-order cursor, and
// the public document each event carries to readers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/contract/enum_names.hpp"

namespace tally::relay {

TALLY_NAMED_ENUM(source_kind, shard, orchestrator);

struct source_config {
  std::string name;  // s0, s1, orchestrator: the consumer names and metric labels use it
  source_kind kind = source_kind::shard;
  std::string conninfo;
};

// [{"name": "s0", "kind": "shard", "conninfo": "..."}, ...]; an error
// message for anything else (unknown kind, duplicate or bad name, no
// conninfo, no sources).
std::variant<std::vector<source_config>, std::string> parse_sources(const nlohmann::json& j);

// The objects readers see: an account (key tenant + account id) or a saga.
TALLY_NAMED_ENUM(object_kind, account, saga);

// Position in commit order: events are read ordered by (tx_id, id), and only
// from transactions older than every transaction of the source database
// still running, so an event committed late by an older transaction is
// never skipped.
struct cursor {
  std::string tx_id = "0";  // xid8 as text
  std::int64_t id = 0;
};

struct outbox_event {
  std::int64_t id = 0;
  std::string tx_id;
  std::string event_id;
  object_kind kind = object_kind::account;
  std::string tenant;
  std::string object_id;  // account id or saga id
  std::int64_t version = 0;
  std::string type;
  std::string doc;  // the public JSON document after this event
  std::int64_t created_ms = 0;
  bool settled = false;  // a saga in a terminal state: its projection expires
};

// The public document an event leaves behind: for an account, the API's
// account object (the shard's payload without tenant and cause, with
// updated_at from the event's time); for a saga, the payload as written
// (already the API's saga object). nullopt when the payload is not a JSON
// object (for a saga, only its first character is checked: the payload's
// column is json, which PostgreSQL took only as valid JSON).
std::optional<std::string> public_doc(object_kind kind, std::string_view payload, std::int64_t created_ms);

}  // namespace tally::relay
