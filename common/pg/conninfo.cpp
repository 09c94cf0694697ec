#include "common/pg/conninfo.hpp"

#include <libpq-fe.h>

#include <charconv>

namespace tally::pg {
namespace {

std::vector<std::string> split(std::string_view list) {
  std::vector<std::string> out;
  for (;;) {
    const auto comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

std::optional<std::string> connect_params::value(std::string_view keyword) const {
  for (std::size_t i = 0; i < keywords.size(); ++i)
    if (keywords[i] == keyword) return values[i];
  return std::nullopt;
}

std::optional<connect_params> session_params(const std::string& conninfo) {
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  if (parse_error != nullptr) PQfreemem(parse_error);
  if (parsed == nullptr) return std::nullopt;
  connect_params out;
  std::string options;
  for (const auto* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (std::string_view(o->keyword) == "options") {
      options = o->val;
      continue;
    }
    out.keywords.emplace_back(o->keyword);
    out.values.emplace_back(o->val);
  }
  PQconninfoFree(parsed);
  out.keywords.emplace_back("options");
  out.values.push_back(options.empty() ? "-c jit=off" : options + " -c jit=off");
  return out;
}

std::vector<connect_params> per_host(const connect_params& p) {
  std::size_t hosts = 1;
  for (const auto* key : {"host", "hostaddr"})
    if (auto v = p.value(key)) hosts = std::max(hosts, split(*v).size());
  if (hosts == 1) return {p};
  std::vector<connect_params> out(hosts, p);
  for (std::size_t k = 0; k < p.keywords.size(); ++k) {
    const auto& key = p.keywords[k];
    if (key != "host" && key != "hostaddr" && key != "port") continue;
    const auto items = split(p.values[k]);
    if (items.size() == 1) continue;  // one port for every host
    for (std::size_t h = 0; h < hosts; ++h) out[h].values[k] = h < items.size() ? items[h] : "";
  }
  return out;
}

std::optional<std::chrono::milliseconds> connect_timeout(const connect_params& p) {
  auto v = p.value("connect_timeout");
  if (!v) return std::nullopt;
  int seconds = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), seconds);
  if (ec != std::errc{} || end != v->data() + v->size() || seconds <= 0) return std::nullopt;
  return std::chrono::seconds(seconds);
}

}  // namespace tally::pg
