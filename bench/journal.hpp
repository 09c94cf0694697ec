#pragma once
// What saga_bench sent and what it was told, kept to send again: a journal
// of answered transfers (one JSON line each: the request's target and
// body, the answer's status, saga id and state), and the judgement of a
// replay of it against what the API promises — the same business key with
// the same content returns the stored saga, and with different content
// answers 422, however long ago the saga settled.
#include <cstddef>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "bench/load.hpp"

namespace tally::bench {

struct journal_entry {
  request sent;
  int status = 0;
  std::string saga_id;  // empty unless the answer named a saga
  std::string state;
};

// Appends one line per answered request; safe from several threads.
class journal_writer {
 public:
  explicit journal_writer(const std::string& path);
  void record(const request& sent, const http::response& answer);

 private:
  std::mutex mutex_;
  std::ofstream out_;
};

std::vector<journal_entry> read_journal(const std::string& path);

// The same request with a different amount: what a replay sends to probe
// that a changed request is still refused.
request changed_content(const request& sent);

// Empty when `answer` is what the API promises for a replay of `first`
// (200 or 202 with Idempotent-Replayed: true and the same saga, in the
// same state if it had settled) or, when `changed` (the request was
// changed_content), for a conflicting one (422 idempotency_conflict);
// otherwise what differs.
std::string replay_difference(const journal_entry& first, bool changed, const http::response& answer);

}  // namespace tally::bench
