#include "common/failpoint/failpoint.hpp"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/log/log.hpp"

namespace tally::failpoint {

namespace detail {
std::atomic<bool> any_armed{false};
}

namespace {

enum class kind { crash, delay, error };

struct action {
  kind what = kind::error;
  std::uint64_t arg = 0;   // crash: the hit that crashes (1-based); delay: milliseconds
  std::uint64_t hits = 0;  // hits since armed
};

std::mutex mutex_;
std::map<std::string, action, std::less<>> armed_;  // sorted, so describe() is stable

constexpr int crash_exit_code = 137;  // what a SIGKILL'd process reports, so harnesses treat both alike

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::uint64_t parse_number(std::string_view text, std::string_view entry) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    throw std::invalid_argument("failpoint: bad number in '" + std::string(entry) + "'");
  return n;
}

// nullopt means "off".
std::optional<action> parse_action(std::string_view text, std::string_view entry) {
  if (text == "off") return std::nullopt;
  if (text == "error") return action{kind::error, 0, 0};
  if (text == "crash") return action{kind::crash, 1, 0};
  if (text.substr(0, 6) == "crash@") {
    const auto n = parse_number(text.substr(6), entry);
    if (n == 0) throw std::invalid_argument("failpoint: crash@N counts from 1 in '" + std::string(entry) + "'");
    return action{kind::crash, n, 0};
  }
  if (text.substr(0, 6) == "delay:") return action{kind::delay, parse_number(text.substr(6), entry), 0};
  throw std::invalid_argument("failpoint: unknown action in '" + std::string(entry) + "'");
}

std::string describe_action(const action& a) {
  switch (a.what) {
    case kind::crash: return a.arg == 1 ? "crash" : "crash@" + std::to_string(a.arg);
    case kind::delay: return "delay:" + std::to_string(a.arg);
    case kind::error: return "error";
  }
  return "error";
}

[[noreturn]] void crash(std::string_view name, std::uint64_t hit) {
  log::warn("failpoint crash", {{"failpoint", std::string(name)}, {"hit", hit}});
  std::cerr.flush();
  std::fflush(nullptr);
  // _exit, not exit: a crash must not run destructors or atexit handlers that
  // could flush or commit what a real crash would lose.
  ::_exit(crash_exit_code);
}

}  // namespace

namespace detail {

bool slow_hit(std::string_view name) {
  std::unique_lock lock(mutex_);
  const auto it = armed_.find(name);
  if (it == armed_.end()) return false;
  action& a = it->second;
  ++a.hits;
  switch (a.what) {
    case kind::error: return true;
    case kind::crash:
      if (a.hits == a.arg) crash(name, a.hits);
      return false;
    case kind::delay: {
      const auto ms = std::chrono::milliseconds(a.arg);
      lock.unlock();  // other threads hitting failpoints must not queue behind the sleep
      std::this_thread::sleep_for(ms);
      return false;
    }
  }
  return false;
}

}  // namespace detail

void arm(std::string_view spec) {
  // Parse everything first so a bad spec changes nothing.
  std::vector<std::pair<std::string, std::optional<action>>> parsed;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view entry = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument("failpoint: expected name=action, got '" + std::string(entry) + "'");
    const std::string_view name = trim(entry.substr(0, eq));
    if (name.empty()) throw std::invalid_argument("failpoint: empty name in '" + std::string(entry) + "'");
    parsed.emplace_back(std::string(name), parse_action(trim(entry.substr(eq + 1)), entry));
  }

  const std::lock_guard lock(mutex_);
  for (auto& [name, a] : parsed) {
    if (a)
      armed_.insert_or_assign(name, *a);  // re-arming restarts the hit count
    else
      armed_.erase(name);
  }
  detail::any_armed.store(!armed_.empty(), std::memory_order_relaxed);
}

void disarm_all() {
  const std::lock_guard lock(mutex_);
  armed_.clear();
  detail::any_armed.store(false, std::memory_order_relaxed);
}

void arm_from_env() {
  if (const char* spec = std::getenv("TALLY_FAILPOINTS")) arm(spec);
}

std::string describe() {
  const std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, a] : armed_) {
    if (!out.empty()) out += ',';
    out += name + "=" + describe_action(a);
  }
  return out;
}

}  // namespace tally::failpoint
