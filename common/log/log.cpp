#include "common/log/log.hpp"

#include "common/time/rfc3339.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <mutex>
#include <string>

namespace tally::log {
namespace {

using json = nlohmann::json;

std::atomic<level> min_level_{level::info};
std::mutex mutex_;               // serialises lines and guards service_
std::string service_ = "tally";  // until init() names the service

constexpr std::array<std::string_view, 4> secret_markers = {"token", "password", "secret", "api_key"};
// Keys the line itself owns; a field with one of these names is renamed so it
// cannot overwrite them.
constexpr std::array<std::string_view, 4> reserved_keys = {"ts", "level", "service", "msg"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_secret_name(std::string_view name) {
  const std::string n = lower(name);
  return std::any_of(secret_markers.begin(), secret_markers.end(),
                     [&](std::string_view m) { return n.find(m) != std::string::npos; });
}

// Secrets also hide inside nested objects (e.g. a "db" object with a
// "password"), so the whole tree is walked, arrays included.
json redact(const json& value) {
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) out[k] = is_secret_name(k) ? json("***") : redact(v);
    return out;
  }
  if (value.is_array()) {
    json out = json::array();
    for (const auto& v : value) out.push_back(redact(v));
    return out;
  }
  return value;
}

std::string_view level_name(level lvl) {
  switch (lvl) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warn";
    case level::error: return "error";
  }
  return "info";
}

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  return time::rfc3339_ms(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
}

// Invalid UTF-8 in a message must not turn a log call into an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One write(2) per line so lines from several threads (and processes sharing
// the descriptor) never interleave; bypasses stdio so nothing sits in a buffer
// when a failpoint calls _exit.
void write_line(const std::string& line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing stderr
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void init(std::string_view service, level min_level) {
  const std::lock_guard lock(mutex_);
  service_ = std::string(service);
  min_level_.store(min_level, std::memory_order_relaxed);
}

void write(level lvl, std::string_view msg, const nlohmann::json& fields) {
  if (lvl < min_level_.load(std::memory_order_relaxed)) return;
  // Logging is called from catch blocks and destructors: it must not throw.
  try {
    std::string body = ",\"msg\":" + dump(json(std::string(msg)));
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) {
        const bool reserved = std::find(reserved_keys.begin(), reserved_keys.end(), k) != reserved_keys.end();
        body += ',';
        body += dump(json(reserved ? "field_" + k : k));
        body += ':';
        body += is_secret_name(k) ? std::string("\"***\"") : dump(redact(v));
      }
    } else if (!fields.is_null()) {
      body += ",\"fields\":";
      body += dump(redact(fields));
    }
    body += "}\n";

    const std::string ts = timestamp();
    const std::lock_guard lock(mutex_);
    write_line("{\"ts\":\"" + ts + "\",\"level\":\"" + std::string(level_name(lvl)) +
               "\",\"service\":" + dump(json(service_)) + body);
  } catch (...) {
    write_line("{\"level\":\"error\",\"msg\":\"log line could not be formatted\"}\n");
  }
}

level parse_level(std::string_view name) {
  const std::string n = lower(name);
  if (n == "debug") return level::debug;
  if (n == "warn" || n == "warning") return level::warn;
  if (n == "error") return level::error;
  return level::info;
}

void fatal(std::string_view service, std::string_view what) {
  try {
    const std::string line = "{\"ts\":\"" + timestamp() +
                             "\",\"level\":\"error\",\"service\":" + dump(json(std::string(service))) +
                             ",\"msg\":\"fatal\",\"error\":" + dump(json(std::string(what))) + "}\n";
    const std::lock_guard lock(mutex_);
    write_line(line);
  } catch (...) {
    write_line("{\"level\":\"error\",\"msg\":\"fatal\"}\n");
  }
}

void exit_on_failure(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    error("fatal", {{"error", ex.what()}});
  } catch (...) {
    error("fatal", {{"error", "unknown exception"}});
  }
  std::_Exit(1);
}

}  // namespace tally::log
