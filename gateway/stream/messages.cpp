#include "gateway/stream/messages.hpp"

#include <nlohmann/json.hpp>

#include "common/contract/saga_id.hpp"
#include "common/validate/fields.hpp"

namespace tally::gateway {

namespace {

// Reads an optional array of ids; the first problem as a message.
std::string read_ids(const nlohmann::json& j, const char* field, bool sagas, std::vector<std::string>& out) {
  auto it = j.find(field);
  if (it == j.end()) return "";
  if (!it->is_array()) return std::string(field) + " must be an array of ids";
  if (it->size() > max_ids_per_message) return std::string(field) + " holds at most 1000 ids";
  for (const auto& v : *it) {
    if (!v.is_string()) return std::string(field) + " must be an array of ids";
    const auto& id = v.get_ref<const std::string&>();
    if (sagas ? !contract::is_saga_id(id) : !validate::is_valid_id(id)) return std::string("bad id in ") + field;
    out.push_back(id);
  }
  return "";
}

}  // namespace

std::variant<subscription_change, bad_message> parse_client_message(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return bad_message{"malformed JSON"};
  if (!j.is_object()) return bad_message{"a message is a JSON object"};
  std::string unknown;
  if (!validate::only_fields(j, {"op", "sagas", "accounts"}, unknown)) return bad_message{"unknown field " + unknown};
  auto op = j.find("op");
  if (op == j.end() || !op->is_string()) return bad_message{"op is required: subscribe or unsubscribe"};
  subscription_change c;
  if (*op == "subscribe") {
    c.subscribe = true;
  } else if (*op == "unsubscribe") {
    c.subscribe = false;
  } else {
    return bad_message{"op must be subscribe or unsubscribe"};
  }
  if (auto e = read_ids(j, "sagas", true, c.sagas); !e.empty()) return bad_message{e};
  if (auto e = read_ids(j, "accounts", false, c.accounts); !e.empty()) return bad_message{e};
  if (c.sagas.empty() && c.accounts.empty()) return bad_message{"name at least one saga or account"};
  return c;
}

std::string account_topic(std::string_view tenant, std::string_view account_id) {
  std::string t = "account:";
  t.append(tenant).append(1, '/').append(account_id);
  return t;
}

std::string saga_topic(std::string_view tenant, std::string_view saga_id) {
  std::string t = "saga:";
  t.append(tenant).append(1, '/').append(saga_id);
  return t;
}

std::string state_frame(bool saga, std::string_view doc) {
  std::string f = saga ? R"({"type":"saga","saga":)" : R"({"type":"account","account":)";
  f.append(doc).append(1, '}');
  return f;
}

std::string error_frame(std::string_view code, std::string_view message) {
  return nlohmann::json{{"type", "error"}, {"error", {{"code", code}, {"message", message}}}}.dump();
}

std::string ping_frame() { return R"({"type":"ping"})"; }

bool version_filter::admit(const std::string& topic, std::int64_t version, bool resync) {
  auto [it, fresh] = last_.try_emplace(topic, version);
  if (fresh) return true;
  if (version <= it->second && !resync) return false;
  it->second = version;
  return true;
}

}  // namespace tally::gateway
