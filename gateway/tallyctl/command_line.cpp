#include "gateway/tallyctl/command_line.hpp"

#include <iostream>

#include <boost/url/url.hpp>

#include "common/http/target.hpp"
#include "gateway/tallyctl/render.hpp"

namespace tally::ctl {

namespace {

using nlohmann::json;

bool terminal(const json& saga) {
  const auto state = saga.value("state", "");
  return state == "completed" || state == "failed" || state == "compensated";
}

}  // namespace

std::string target(std::initializer_list<std::string> segments,
                   std::initializer_list<std::pair<std::string, std::string>> query) {
  boost::urls::url u;
  std::string path;
  for (const auto& s : segments) path += "/" + http::encoded_segment(s);
  u.set_encoded_path(path);
  for (const auto& [k, v] : query)
    if (!v.empty()) u.params().append({k, v});
  return std::string(u.buffer());
}

std::string text(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : ""; }

int command_line::show(const api_reply& r, renderer render) const {
  if (r.status == 0) {
    std::cerr << "tallyctl: cannot reach " << o_.url << ": " << r.transport << "\n";
    return 1;
  }
  if (r.status >= 400) {
    const auto e = r.body.is_object() ? r.body.value("error", json::object()) : json::object();
    std::cerr << "tallyctl: " << e.value("code", "http_" + std::to_string(r.status)) << ": "
              << e.value("message", r.body.is_string() ? r.body.get<std::string>() : r.body.dump()) << " (HTTP "
              << r.status << ", request " << e.value("request_id", "-") << ")\n";
    return 1;
  }
  std::cout << (o_.as_json ? r.body.dump(2) + "\n" : render(r.body));
  return 0;
}

api_client command_line::client() const {
  auto at = parse_url(o_.url);
  const auto timeout = std::chrono::milliseconds(o_.wait_ms + 10000);
  return api_client(at ? *at : endpoint{}, o_.key, timeout);
}

int command_line::watch(const std::string& id) const {
  auto api = client();
  std::string last_state, why;
  int failed = 0;
  auto last_read = std::chrono::steady_clock::time_point{};
  auto seen = [&](const json& saga) {
    if (saga.value("state", "") != last_state) print_state(saga);
    last_state = saga.value("state", "");
    return !terminal(saga);
  };
  const bool ok = api.watch_saga(
      id,
      [&](const json& frame) {
        if (frame.is_object() && frame.value("type", "") == "saga" && !seen(frame["saga"])) return false;
        if (std::chrono::steady_clock::now() - last_read < std::chrono::seconds(5)) return true;
        last_read = std::chrono::steady_clock::now();
        auto now = api.get(target({"v1", "sagas", id}, {{"consistency", "strong"}}));
        if (now.status == 200) return seen(now.body);
        failed = show(now, saga_line);
        return false;
      },
      why);
  if (failed) return failed;
  if (!ok || !terminal(json{{"state", last_state}})) {
    std::cerr << "tallyctl: " << why << "\n";
    return 1;
  }
  return 0;
}

std::string command_line::write_target(const char* collection) const {
  return target({"v1", collection}, {{"wait_ms", std::to_string(o_.wait_ms)}});
}

void command_line::print_state(const json& saga) const {
  std::cout << (o_.as_json ? saga.dump() + "\n" : saga_line(saga)) << std::flush;
}

}  // namespace tally::ctl
