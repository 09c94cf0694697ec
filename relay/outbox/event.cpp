#include "relay/outbox/event.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "common/contract/account_document.hpp"
#include "common/validate/fields.hpp"

namespace tally::relay {

std::variant<std::vector<source_config>, std::string> parse_sources(const nlohmann::json& j) {
  if (!j.is_array() || j.empty()) return std::string("sources must be a non-empty JSON array");
  std::vector<source_config> out;
  std::set<std::string> names;
  for (const auto& s : j) {
    if (!s.is_object()) return std::string("each source is an object {name, kind, conninfo}");
    const auto name = s.value("name", std::string());
    const auto kind = contract::value_of(source_kind_names, s.value("kind", std::string()));
    const auto conninfo = s.value("conninfo", std::string());
    if (!validate::is_valid_id(name)) return "bad source name '" + name + "'";
    if (!names.insert(name).second) return "source " + name + " is named twice";
    if (!kind) return "source " + name + ": kind must be shard or orchestrator";
    if (conninfo.empty()) return "source " + name + ": conninfo is required";
    out.push_back({name, *kind, conninfo});
  }
  return out;
}

std::optional<std::string> public_doc(object_kind kind, std::string_view payload, std::int64_t created_ms) {
  if (kind == object_kind::saga) {
    if (!payload.starts_with('{')) return std::nullopt;
    return std::string(payload);
  }
  auto doc = contract::public_from_payload(nlohmann::json::parse(payload, nullptr, false), created_ms);
  if (!doc) return std::nullopt;
  return doc->dump();
}

}  // namespace tally::relay
