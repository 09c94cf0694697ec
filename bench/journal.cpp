#include "bench/journal.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tally::bench {

namespace {

bool settled(const std::string& state) { return state == "completed" || state == "failed" || state == "compensated"; }

}  // namespace

journal_writer::journal_writer(const std::string& path) : out_(path, std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot write the journal " + path);
}

void journal_writer::record(const request& sent, const http::response& answer) {
  auto body = nlohmann::json::parse(answer.body(), nullptr, false);
  nlohmann::json line{{"target", sent.target}, {"body", sent.body}, {"status", answer.result_int()}};
  if (body.is_object() && body.contains("saga_id")) {
    line["saga_id"] = body["saga_id"];
    line["state"] = body.value("state", "");
  }
  const auto text = line.dump() + "\n";
  std::lock_guard lock(mutex_);
  out_ << text;
}

std::vector<journal_entry> read_journal(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the journal " + path);
  std::vector<journal_entry> out;
  for (std::string text; std::getline(in, text);) {
    auto line = nlohmann::json::parse(text);
    out.push_back({{line.at("target").get<std::string>(), line.at("body").get<std::string>(), out.size()},
                   line.at("status").get<int>(),
                   line.value("saga_id", ""),
                   line.value("state", "")});
  }
  return out;
}

request changed_content(const request& sent) {
  auto body = nlohmann::json::parse(sent.body);
  body["amount"] = body.value("amount", 1) + 1;
  return {sent.target, body.dump(), sent.id};
}

std::string replay_difference(const journal_entry& first, bool changed, const http::response& answer) {
  const int status = answer.result_int();
  auto body = nlohmann::json::parse(answer.body(), nullptr, false);
  if (changed) {
    if (status != 422) return "a changed request answered " + std::to_string(status) + ", not 422";
    if (!body.is_object() || body.value(nlohmann::json::json_pointer("/error/code"), "") != "idempotency_conflict")
      return "a changed request's 422 is not idempotency_conflict: " + answer.body();
    return "";
  }
  if (status != 200 && status != 202) return "answered " + std::to_string(status) + ": " + answer.body();
  if (answer["Idempotent-Replayed"] != "true") return "no Idempotent-Replayed: true";
  if (!body.is_object() || body.value("saga_id", "") != first.saga_id)
    return "another saga than " + first.saga_id + ": " + answer.body();
  if (settled(first.state) && (status != 200 || body.value("state", "") != first.state))
    return "settled " + first.state + ", now " + std::to_string(status) + " " + body.value("state", "");
  return "";
}

}  // namespace tally::bench
