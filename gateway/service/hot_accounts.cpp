#include "gateway/service/hot_accounts.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

#include "common/contract/errors.hpp"

namespace tally::gateway {

std::optional<std::int64_t> account_busy_retry_after(unsigned status, std::string_view body,
                                                     std::string_view retry_after) {
  if (status < 400) return std::nullopt;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return std::nullopt;
  const auto code = j["error"].value("code", std::string());
  if (code != contract::to_string(contract::error_code::account_busy)) return std::nullopt;
  std::int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), seconds);
  if (ec != std::errc() || end != retry_after.data() + retry_after.size() || seconds < 1) return 1;
  return seconds;
}

void keep_own_hot_accounts(nlohmann::json& status, const std::string& tenant) {
  auto admission = status.find("admission");
  if (admission == status.end() || !admission->is_object() || !admission->contains("hottest")) return;
  auto own = nlohmann::json::array();
  for (auto& a : (*admission)["hottest"])
    if (a.is_object() && a.value("tenant", std::string()) == tenant) {
      a.erase("tenant");
      own.push_back(std::move(a));
    }
  (*admission)["hottest"] = std::move(own);
}

}  // namespace tally::gateway
