#pragma once
// Hot-account admission, as pure decisions. One account's commands are
// decided one batch after another (batches in flight never share an
// account), so an account written faster than its batches commit builds a
// queue whose wait nothing else bounds. The shard promises a maximum queue
// wait per command instead (admission.max_wait_ms): a command that would
// wait longer behind its own account is refused `account_busy`, before
// anything is sent to PostgreSQL, so it changes nothing and the same key
// resent later is decided normally.
//
// Two checks: on arrival, from what the commit queue knows about the
// account (an estimate); and when its batch starts, a command that queued
// behind its account and has already waited past the maximum (the safety
// net for a wrong estimate, e.g. a commit that stalled). A wait for a free
// worker behind other accounts (the whole shard is busy) is not the
// account's doing and is not refused here.
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>

namespace tally::shard {

using micros = std::chrono::microseconds;

struct admission_policy {
  micros max_wait{20'000};  // 0: admission off, every command waits its turn
  bool enabled() const { return max_wait.count() > 0; }
};

// What the commit queue knows about one account when a command for it arrives.
struct account_queue {
  std::size_t queued_ahead = 0;         // the account's commands queued before this one
  std::optional<micros> in_flight_for;  // a batch holding the account has run this long; none: no batch holds it
  micros batch_time{0};                 // what a batch takes (expected_batch_time); 0: nothing measured yet
  std::size_t max_batch = 1000;
};

struct admission {
  bool admitted = true;
  micros expected_wait{0};                   // until the command's batch starts
  std::chrono::milliseconds retry_after{0};  // refused: when the work now queued should be done (>= 1 ms)
};

// The expected wait: the rest of the batch holding the account (its
// expected time minus what it has run; an overdue batch is expected to run
// as long again as it has), plus one batch time for each full batch of the
// account's queued commands ahead (a batch takes up to max_batch of them).
// Refused when that exceeds the maximum wait.
admission admit(const account_queue& q, const admission_policy& p);

// What a batch is expected to take: the median of the recent batches'
// times (one stall does not move it). Empty: 0.
micros expected_batch_time(std::span<const micros> recent);

// When the command's batch starts: refuse a command that queued behind its
// own account and has already waited longer than the maximum.
bool refuse_at_start(micros waited, bool queued_behind_account, const admission_policy& p);

}  // namespace tally::shard
