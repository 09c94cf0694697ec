// libFuzzer target: the gateway's request parsing and validation (write
// bodies of every kind, query strings, request targets, WebSocket
// messages). It must never crash, and what it accepts must be well-formed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/contract/saga_request.hpp"
#include "common/http/target.hpp"
#include "common/validate/fields.hpp"
#include "gateway/api/requests.hpp"
#include "gateway/stream/messages.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tally;
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      const auto kind = static_cast<gateway::write_kind>((data[0] / 4) % 6);
      auto r = gateway::check_write(kind, "fuzz", input);
      if (auto* ok = std::get_if<gateway::accepted_write>(&r)) {
        for (const auto& a : ok->accounts) require(validate::is_valid_id(a));
        // What the gateway forwards reads back as the request it accepted.
        if (ok->saga) require(contract::from_canonical_json(contract::to_canonical_json(*ok->saga)) == *ok->saga);
      }
      break;
    }
    case 1: {
      auto r = gateway::check_query(input);
      if (auto* ok = std::get_if<gateway::read_params>(&r)) {
        require(!ok->wait_ms || (*ok->wait_ms >= 0 && *ok->wait_ms <= 30000));
        require(!ok->limit || (*ok->limit >= 1 && *ok->limit <= 500));
      }
      break;
    }
    case 2: {
      auto t = http::split_target(input);
      // Segments are decoded (so may hold '/'); encoded again, each one
      // comes back whole.
      for (const auto& segment : t.path) {
        require(!segment.empty());
        const auto again = http::split_target("/" + http::encoded_segment(segment));
        require(again.path.size() == 1 && again.path[0] == segment);
      }
      break;
    }
    default: {
      auto r = gateway::parse_client_message(input);
      if (auto* ok = std::get_if<gateway::subscription_change>(&r)) {
        require(!ok->sagas.empty() || !ok->accounts.empty());
        for (const auto& a : ok->accounts) require(validate::is_valid_id(a));
      }
      break;
    }
  }
  return 0;
}
