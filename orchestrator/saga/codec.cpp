#include "orchestrator/saga/codec.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/time/rfc3339.hpp"

namespace tally::orch {

namespace {

using json = nlohmann::json;

// A call's progress, each field only where it differs from an idle call's
// (an idle call is {}): every save writes the document whole, and most of
// a saga's calls are idle undos.
json call_json(const call_progress& c) {
  json j = json::object();
  if (c.status != call_status::idle) j["s"] = to_string(c.status);
  if (c.attempts != 0) j["n"] = c.attempts;
  if (!c.code.empty()) j["c"] = c.code;
  if (c.due != instant{}) j["d"] = unix_ms(c.due);
  if (c.started != instant{}) j["t0"] = unix_ms(c.started);
  if (c.finished != instant{}) j["t1"] = unix_ms(c.finished);
  if (c.delivered) j["dv"] = true;
  return j;
}

call_progress call_from(const json& j) {
  call_progress c;
  auto status = call_status_from(j.value("s", std::string(to_string(call_status::idle))));
  if (!status) throw std::invalid_argument("unknown call status");
  c.status = *status;
  c.attempts = j.value("n", 0);
  c.code = j.value("c", "");
  c.due = instant_from_unix_ms(j.value("d", std::int64_t{0}));
  c.started = instant_from_unix_ms(j.value("t0", std::int64_t{0}));
  c.finished = instant_from_unix_ms(j.value("t1", std::int64_t{0}));
  c.delivered = j.value("dv", false);
  return c;
}

// A hold's lots: [[amount, expires_at_ms or null, rule_version], ...].
json lots_json(const std::vector<lot_share>& lots) {
  auto j = json::array();
  for (const auto& l : lots)
    j.push_back({l.amount, l.expires_at ? json(*l.expires_at) : json(nullptr), l.rule_version});
  return j;
}

std::vector<lot_share> lots_from(const json& j) {
  std::vector<lot_share> out;
  for (const auto& l : j) {
    lot_share s;
    s.amount = l.at(0).get<std::int64_t>();
    if (!l.at(1).is_null()) s.expires_at = l.at(1).get<std::int64_t>();
    s.rule_version = l.at(2).get<std::string>();
    out.push_back(std::move(s));
  }
  return out;
}

// A step's state as users see it, from its calls.
std::string step_state(const std::vector<call_state>& calls) {
  auto all = [&](auto pred) { return std::all_of(calls.begin(), calls.end(), pred); };
  auto any = [&](auto pred) { return std::any_of(calls.begin(), calls.end(), pred); };
  if (all([](const call_state& c) { return c.forward.status == call_status::idle; })) return "pending";
  if (any([](const call_state& c) { return c.undo.status != call_status::idle; }))
    return all([](const call_state& c) { return !c.may_have_applied() || c.undo.status == call_status::succeeded; })
               ? "compensated"
               : "compensating";
  if (all([](const call_state& c) { return c.forward.status == call_status::succeeded; })) return "succeeded";
  if (any([](const call_state& c) {
        return c.forward.status == call_status::rejected || c.forward.status == call_status::not_applied;
      }))
    return "failed";
  return "running";
}

// A step's error as the API shows it: the code of its first call that did
// not succeed, and what that code means for the call.
json step_error(const call_progress& c) {
  std::string message;
  switch (c.status) {
    case call_status::rejected: message = "the shard refused the call: " + c.code; break;
    case call_status::not_applied: message = "the call was cancelled before it took effect"; break;
    default: message = "the call's last attempt did not succeed: " + c.code; break;
  }
  return {{"code", c.code}, {"message", std::move(message)}};
}

}  // namespace

std::string to_rfc3339(instant t) { return time::rfc3339_ms(unix_ms(t)); }

json input_to_json(const saga_input& in) {
  json j = json::object();
  auto text = [&](const char* k, const std::string& v) {
    if (!v.empty()) j[k] = v;
  };
  text("account", in.account);
  text("source", in.source);
  text("destination", in.destination);
  if (in.amount != 0) j["amount"] = in.amount;
  text("memo", in.memo);
  if (in.expires_at) j["expires_at_ms"] = *in.expires_at;
  text("rule_version", in.rule_version);
  if (in.hold_timeout) j["hold_timeout_ms"] = in.hold_timeout->count();
  if (!in.items.empty()) {
    auto items = json::array();
    for (const auto& i : in.items) items.push_back({{"account_id", i.account}, {"amount", i.amount}});
    j["items"] = std::move(items);
  }
  text("original_saga_id", in.original_saga_id);
  text("original_type", in.original_type);
  text("original_key", in.original_key);
  return j;
}

saga_input input_from_json(const json& j) {
  saga_input in;
  in.account = j.value("account", "");
  in.source = j.value("source", "");
  in.destination = j.value("destination", "");
  in.amount = j.value("amount", std::int64_t{0});
  in.memo = j.value("memo", "");
  if (j.contains("expires_at_ms")) in.expires_at = j.at("expires_at_ms").get<std::int64_t>();
  in.rule_version = j.value("rule_version", "");
  if (j.contains("hold_timeout_ms"))
    in.hold_timeout = std::chrono::milliseconds(j.at("hold_timeout_ms").get<std::int64_t>());
  if (j.contains("items"))
    for (const auto& i : j.at("items"))
      in.items.push_back({i.at("account_id").get<std::string>(), i.at("amount").get<std::int64_t>()});
  in.original_saga_id = j.value("original_saga_id", "");
  in.original_type = j.value("original_type", "");
  in.original_key = j.value("original_key", "");
  return in;
}

json progress_to_json(const saga& s) {
  auto steps = json::array();
  for (const auto& step : s.calls) {
    auto calls = json::array();
    for (const auto& c : step) {
      json call{{"f", call_json(c.forward)}};
      if (c.undo != call_progress{}) call["u"] = call_json(c.undo);
      if (!c.lots.empty()) call["l"] = lots_json(c.lots);
      if (c.amount != 0) call["a"] = c.amount;
      calls.push_back(std::move(call));
    }
    steps.push_back(std::move(calls));
  }
  return {{"stage", to_string(s.stage)},
          {"cursor", s.cursor},
          {"confirmed", s.confirmed},
          {"end", to_string(s.end_after_compensation)},
          {"hold_deadline", s.hold_deadline ? json(unix_ms(*s.hold_deadline)) : json(nullptr)},
          {"calls", std::move(steps)}};
}

bool progress_from_json(const json& j, saga& s, std::string& error) {
  try {
    auto stage = phase_from(j.at("stage").get<std::string>());
    auto end = saga_state_from(j.at("end").get<std::string>());
    if (!stage || !end) throw std::invalid_argument("unknown stage or end state");
    s.stage = *stage;
    s.end_after_compensation = *end;
    s.cursor = j.at("cursor").get<std::size_t>();
    s.confirmed = j.at("confirmed").get<bool>();
    const auto& hd = j.at("hold_deadline");
    s.hold_deadline =
        hd.is_null() ? std::nullopt : std::optional<instant>(instant_from_unix_ms(hd.get<std::int64_t>()));
    s.calls.clear();
    for (const auto& step : j.at("calls")) {
      auto& calls = s.calls.emplace_back();
      for (const auto& c : step)
        calls.push_back({call_from(c.at("f")), c.contains("u") ? call_from(c.at("u")) : call_progress{},
                         c.contains("l") ? lots_from(c.at("l")) : std::vector<lot_share>{},
                         c.value("a", std::int64_t{0})});
    }
    if (s.cursor >= s.calls.size()) throw std::invalid_argument("cursor past the last step");
    return true;
  } catch (const std::exception& e) {
    error = std::string("saga progress unreadable: ") + e.what();
    return false;
  }
}

json public_json(const saga& s, const workflow_def& w, instant updated) {
  json input = json::object();
  const auto& in = s.input;
  switch (w.type) {
    case saga_type::credit:
      input = {{"account_id", in.account}, {"amount", in.amount}};
      if (!in.memo.empty()) input["memo"] = in.memo;
      if (in.expires_at) input["expires_at"] = time::rfc3339_ms(*in.expires_at);
      if (!in.rule_version.empty()) input["rule_version"] = in.rule_version;
      break;
    case saga_type::deduct:
      input = {{"account_id", in.account}, {"amount", in.amount}};
      if (in.hold_timeout) input["hold_timeout_ms"] = in.hold_timeout->count();
      break;
    case saga_type::refund:
      // The account refunded (none: every item of a batch deduction); no
      // amount: what was left.
      input = {{"original_saga_id", in.original_saga_id}};
      if (!in.account.empty()) input["account_id"] = in.account;
      if (in.amount != 0) input["amount"] = in.amount;
      break;
    case saga_type::transfer:
      input = {{"from_account", in.source}, {"to_account", in.destination}, {"amount", in.amount}};
      break;
    case saga_type::batch_deduct: {
      auto items = json::array();
      for (const auto& i : in.items) items.push_back({{"account_id", i.account}, {"amount", i.amount}});
      input = {{"items", std::move(items)}};
      break;
    }
  }
  auto steps = json::array();
  for (std::size_t i = 0; i < w.steps.size() && i < s.calls.size(); ++i) {
    const auto& calls = s.calls[i];
    int attempts = 0;
    instant started = instant::max(), finished{};
    const call_progress* failed = nullptr;
    bool finished_all = true;
    for (const auto& c : calls) {
      attempts += c.forward.attempts + c.undo.attempts;
      if (c.forward.attempts > 0) started = std::min(started, c.forward.started);
      const auto& last = c.undo.attempts > 0 ? c.undo : c.forward;
      finished_all = finished_all && last.finished != instant{};
      finished = std::max(finished, last.finished);
      if (!failed && !c.forward.code.empty() && c.forward.status != call_status::succeeded) failed = &c.forward;
    }
    steps.push_back({{"name", w.steps[i].name},
                     {"state", step_state(calls)},
                     {"attempts", attempts},
                     {"started_at", started == instant::max() ? json(nullptr) : json(to_rfc3339(started))},
                     {"finished_at", finished_all && attempts > 0 ? json(to_rfc3339(finished)) : json(nullptr)},
                     {"error", failed ? step_error(*failed) : json(nullptr)}});
  }
  json out{{"saga_id", s.id},
           {"type", to_string(w.type)},
           {"biz_id", s.biz_id},
           {"state", to_string(s.state)},
           {"input", std::move(input)},
           {"error", s.error ? json({{"code", s.error->code}, {"message", s.error->message}}) : json(nullptr)},
           {"created_at", to_rfc3339(s.created)},
           {"updated_at", to_rfc3339(updated)},
           {"deadline", to_rfc3339(s.deadline)},
           {"steps", std::move(steps)}};
  if (w.type == saga_type::refund) out["refunded"] = refunded_json(refunded_by(s, w));
  return out;
}

json refunded_json(const std::vector<saga_item>& items) {
  std::int64_t total = 0;
  auto all = json::array();
  for (const auto& i : items) {
    total += i.amount;
    all.push_back({{"account_id", i.account}, {"amount", i.amount}});
  }
  return {{"amount", total}, {"items", std::move(all)}};
}

std::vector<saga_item> refunded_of_original(const saga& original, saga_type type,
                                            const std::vector<saga_item>& refunds) {
  std::vector<saga_item> out;
  switch (type) {
    case saga_type::deduct: out.push_back({original.input.account, 0}); break;
    case saga_type::transfer: out.push_back({original.input.source, 0}); break;
    case saga_type::batch_deduct:
      for (const auto& i : original.input.items) out.push_back({i.account, 0});
      break;
    case saga_type::credit:
    case saga_type::refund: return out;
  }
  for (const auto& r : refunds)
    for (auto& item : out)
      if (item.account == r.account) item.amount += r.amount;
  return out;
}

}  // namespace tally::orch
