#pragma once
// Sagas and engines the orchestrator's unit tests start from.
#include <stdexcept>
#include <string>

#include "orchestrator/engine/engine.hpp"

namespace tally::orch::testing {

// A fixed jitter makes every backoff delay computable by hand.
inline engine engine_for(const std::string& workflow, double jitter = 0.5) {
  const auto* w = find_workflow(workflow);
  if (!w) throw std::logic_error("no workflow " + workflow);
  return engine(*w, [jitter] { return jitter; });
}

// alice -> bob, 30.
inline saga transfer_saga(std::string id = "sg_01TRANSFER") {
  saga s;
  s.id = std::move(id);
  s.tenant = "t1";
  s.biz_id = "t-1";
  s.input.source = "alice";
  s.input.destination = "bob";
  s.input.amount = 30;
  return s;
}

inline saga one_account(std::string id, std::string account, std::int64_t amount) {
  saga s;
  s.id = std::move(id);
  s.tenant = "t1";
  s.input.account = std::move(account);
  s.input.amount = amount;
  return s;
}

inline answer ok() { return {answer_kind::succeeded, ""}; }
inline answer rejected(std::string code) { return {answer_kind::rejected, std::move(code)}; }
inline answer lost() { return {answer_kind::transport, "timeout"}; }

}  // namespace tally::orch::testing
