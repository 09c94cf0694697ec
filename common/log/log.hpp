#pragma once
// JSON logs, one object per line on stderr:
// {"ts":"2026-12-01T10:00:00.123Z","level":"info","service":"shard","msg":"...",<fields>}
// Fields whose name contains "token", "password", "secret" or "api_key" are
// written as "***" so secrets never reach a log.
#include <exception>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tally::log {

enum class level { debug, info, warn, error };

void init(std::string_view service, level min_level = level::info);
void write(level lvl, std::string_view msg, const nlohmann::json& fields = nlohmann::json::object());
// A service's last words (a JSON line on stderr), usable before init().
void fatal(std::string_view service, std::string_view what);
// Completion of a service's main coroutine: an exception is logged and ends
// the process (exit code 1).
void exit_on_failure(std::exception_ptr e);
inline void debug(std::string_view m, const nlohmann::json& f = nlohmann::json::object()) { write(level::debug, m, f); }
inline void info(std::string_view m, const nlohmann::json& f = nlohmann::json::object()) { write(level::info, m, f); }
inline void warn(std::string_view m, const nlohmann::json& f = nlohmann::json::object()) { write(level::warn, m, f); }
inline void error(std::string_view m, const nlohmann::json& f = nlohmann::json::object()) { write(level::error, m, f); }
level parse_level(std::string_view name);  // unknown names → info

}  // namespace tally::log
