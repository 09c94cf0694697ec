#pragma once
// The saga engine's decisions, free of I/O. A saga is a workflow (data)
// plus the progress of every participant call it has made. Each event — the
// saga starts, a participant answers, time passes, the app confirms or
// cancels, an operator aborts or retries — changes the saga and yields the
// calls to send and when to look at the saga again. The clock reading and
// the randomness (backoff jitter) come in as arguments, so a simulation can
// drive the engine deterministically.
//
// The rules:
// - Forward, a step's calls are sent (all items of a batch step at once)
//   and resent with the same key after a timeout or a transport failure,
//   with capped exponential backoff and jitter. Past a call's attempt budget
//   the saga is needs_attention, and the call is still retried.
// - Before the pivot, a business rejection, the deadline, the app's cancel,
//   the hold timeout or an operator's abort compensates: every step that
//   may have taken effect is undone in reverse order — a hold is released
//   (a release that arrives first leaves a tombstone that refuses the late
//   hold), an effect's key is cancelled (cancel_key wins, or reports that
//   the effect applied). Undo calls are retried until they succeed.
// - If cancel_key finds the pivot applied, the saga is past the pivot after
//   all and goes forward. After the pivot there is only forward recovery.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/contract/enum_names.hpp"
#include "common/contract/saga_request.hpp"
#include "orchestrator/workflow/definition.hpp"

namespace tally::orch {

using instant = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;
// Unix milliseconds, the form instants are stored and sent in.
inline std::int64_t unix_ms(instant t) { return t.time_since_epoch().count(); }
inline instant instant_from_unix_ms(std::int64_t ms) { return instant{std::chrono::milliseconds(ms)}; }

TALLY_NAMED_ENUM(saga_state, pending, running, awaiting_confirmation, compensating, completed, failed, compensated,
                 needs_attention);
inline constexpr saga_state all_saga_states[] = {
    saga_state::pending,   saga_state::running, saga_state::awaiting_confirmation, saga_state::compensating,
    saga_state::completed, saga_state::failed,  saga_state::compensated,           saga_state::needs_attention};
constexpr std::optional<saga_state> saga_state_from(std::string_view s) {
  return contract::value_of(saga_state_names, s);
}
bool is_terminal(saga_state s);
// The saga state machine's one rule every move keeps: a terminal saga
// never moves again, and no saga goes back to pending.
bool may_move(saga_state from, saga_state to);

using contract::saga_item;

// A part of an amount by the lot it came from, as a hold's allocation
// names it: a transfer's destination credit re-grants it with its expiry.
struct lot_share {
  std::int64_t amount = 0;
  std::optional<std::int64_t> expires_at;  // unix ms; none: never expires
  std::string rule_version = "1";
  bool operator==(const lot_share&) const = default;
};

// A transfer's destination lots: one per distinct expiry of the source's
// allocation, in its order, with the first share's rule version.
std::vector<lot_share> group_by_expiry(const std::vector<lot_share>& shares);

// What the saga was asked to do, with the accounts resolved per role.
struct saga_input {
  std::string account;      // credit, deduct, refund of a deduction
  std::string source;       // transfer; refund of a transfer: the account refunded
  std::string destination;  // transfer; refund of a transfer: the account giving back
  std::int64_t amount = 0;
  std::string memo;
  std::optional<std::int64_t> expires_at;                 // credit: its lot's expiry (unix ms)
  std::string rule_version;                               // credit: its lot's rule version; empty: the default
  std::optional<std::chrono::milliseconds> hold_timeout;  // held deduction
  std::vector<saga_item> items;                           // batch_deduct
  // refund: the original saga, and the shard key its refund references
  std::string original_saga_id;
  std::string original_type;  // "debit" or "capture"
  std::string original_key;
  bool operator==(const saga_input&) const = default;
};

// The progress of one call (one step on one account) or of its undo.
TALLY_NAMED_ENUM(call_status,
                 idle,         // never sent
                 in_flight,    // sent, no answer yet; `due` is its timeout
                 waiting,      // answered "not now" or not at all; resent at `due`
                 succeeded,    // took effect (an undo: the effect is undone or fenced off)
                 rejected,     // a stored business rejection: never took effect
                 not_applied,  // the key was cancelled before it took effect
                 applied);     // an undo's cancel_key found the effect applied
constexpr std::optional<call_status> call_status_from(std::string_view s) {
  return contract::value_of(call_status_names, s);
}

struct call_progress {
  call_status status = call_status::idle;
  int attempts = 0;
  std::string code;  // the last rejection, retry or transport reason
  instant due{};
  instant started{};   // first sent
  instant finished{};  // final status reached
  // Whether any attempt may have reached the participant. A call whose
  // every attempt was refused at connect cannot have taken effect.
  bool delivered = false;
  bool operator==(const call_progress&) const = default;
};

struct call_state {
  call_progress forward;
  call_progress undo;
  std::vector<lot_share> lots;  // a hold that succeeded: what it holds, by lot
  // A refund that applied: what it gave back (one without an amount gives
  // back what was left of its original, which only the shard knows).
  std::int64_t amount = 0;
  // Whether the forward call may have taken effect, so compensation must
  // undo or fence it off.
  bool may_have_applied() const;
  bool operator==(const call_state&) const = default;
};

TALLY_NAMED_ENUM(phase, forward, awaiting, compensating, done);
constexpr std::optional<phase> phase_from(std::string_view s) { return contract::value_of(phase_names, s); }

struct saga_error {
  std::string code;
  std::string message;
  bool operator==(const saga_error&) const = default;
};

struct saga {
  std::string id;  // "sg_" + 26 characters
  std::string tenant;
  std::string biz_id;
  std::string workflow;  // a workflow_def name
  saga_input input;
  saga_state state = saga_state::pending;
  phase stage = phase::forward;
  std::size_t cursor = 0;                      // forward: the step being run; compensating: the step being undone
  std::vector<std::vector<call_state>> calls;  // [step][item]
  bool confirmed = false;                      // held deduction: the app confirmed
  std::optional<saga_error> error;
  std::string attention;  // why needs_attention, else empty
  saga_state end_after_compensation = saga_state::failed;
  instant created{};
  instant deadline{};                    // forward progress before the pivot must finish by then
  std::optional<instant> hold_deadline;  // held deduction: release when not confirmed by then
  std::optional<instant> wake;           // when the engine must look at this saga again
  bool operator==(const saga&) const = default;
};

// Sets the saga's state, asserting the move is one the state machine allows.
void move_to(saga& s, saga_state to);

// What a refund saga gave back so far, per account, in the order of its
// calls: the refund calls that applied (any saga state).
std::vector<saga_item> refunded_by(const saga& refund, const workflow_def& w);

// The key a saga's calls carry on the shards: derived from the saga id, so
// re-sending after a crash or a lost reply is always safe.
std::string step_key(const saga& s);

// One shard command to send.
struct call_ref {
  std::size_t step = 0;
  std::size_t item = 0;
  bool undo = false;
  bool operator==(const call_ref&) const = default;
};

struct outgoing_call {
  call_ref ref;
  participant_op op = participant_op::credit;
  std::string account;
  std::string biz_id;       // credit/debit/refund: the key; hold/capture/release: the hold id
  std::int64_t amount = 0;  // 0: not sent (capture takes the whole hold)
  std::string memo;
  std::string target_type;  // cancel_key: the cancelled command's type
  std::string target_id;
  std::string original_type;  // refund
  std::string original_id;
  std::optional<std::int64_t> expires_at;  // credit: one lot with this expiry...
  std::string rule_version;
  std::vector<lot_share> lots;  // ...or, for a transfer's destination, these lots
  int attempt = 0;
};

// How a participant answered (or did not).
enum class answer_kind {
  succeeded,
  rejected,                   // stored business rejection; `code` says why
  cancelled,                  // the key is tombstoned
  already_applied_succeeded,  // cancel_key: the effect applied
  already_applied_other,      // cancel_key: the key's stored outcome is a rejection or tombstone
  retry,                      // not decided, nothing stored; `code` says why
  conflict,                   // the key was used with other content (a bug: keys are derived)
  transport,                  // unavailable, timed out, connection lost: the outcome is unknown
  not_delivered,              // the request never reached the participant (connection refused)
};

// A shard's refusal of a command whose account has more queued than it
// can start within the shard's maximum wait: nothing was decided or
// stored (answer_kind::retry); resend the same key, no sooner than the
// shard's retry_after.
inline constexpr std::string_view account_busy_code = contract::to_string(contract::shard_code::account_busy);

struct answer {
  answer_kind kind = answer_kind::transport;
  std::string code;
  std::vector<lot_share> lots;               // succeeded: the lots the command moved
  std::int64_t amount = 0;                   // succeeded, or a cancel_key's applied effect: the amount moved
  std::chrono::milliseconds retry_after{0};  // retry: the shard's suggested pause (account_busy)

  answer() = default;
  answer(answer_kind k, std::string c, std::vector<lot_share> l = {})
      : kind(k), code(std::move(c)), lots(std::move(l)) {}
};

struct decision {
  std::vector<outgoing_call> send;
};

// The code a call waits under after the shard found its key stored with
// other content: it needs an operator (engine::update_attention).
inline constexpr std::string_view conflict_code = contract::to_string(contract::shard_code::idempotency_conflict);

// Uniform in [0, 1): the jitter source.
using random_source = std::function<double()>;

// Capped exponential backoff with jitter: attempt n (1-based) waits between
// half and all of min(max, initial * 2^(n-1)).
std::chrono::milliseconds backoff(const retry_policy& p, int attempt, const random_source& random);

class engine {
 public:
  engine(const workflow_def& w, random_source random) : workflow_(w), random_(std::move(random)) {}

  // A new saga: lays out its calls and sends the first step's.
  decision start(saga& s, instant now) const;
  // A participant answered one call (late answers of calls no longer
  // awaited are recorded and change nothing else).
  decision on_answer(saga& s, const call_ref& ref, const answer& a, instant now) const;
  // Time passed: timeouts, backoffs, the deadline, the hold timeout.
  decision on_wake(saga& s, instant now) const;
  // The saga was loaded by an instance that did not send its calls in
  // flight (after a crash, or a lease taken over): their answers will never
  // arrive here, so they are re-sent now with the same keys. Calls of later
  // steps up to the pivot that may have gone out before their state was
  // written (workflow_def::sendable_before_saving) are marked unknown: sent
  // again when the saga gets there, fenced off first when it compensates.
  decision recover(saga& s, instant now) const;

  enum class request_result { done, already, invalid_state };
  // Held deduction: capture. Before the hold is in, remembered.
  request_result confirm(saga& s, instant now, decision& d) const;
  // Held deduction: release (-> compensated). Before the capture only.
  request_result cancel(saga& s, instant now, decision& d) const;
  // Operator: compensate, before the pivot only.
  request_result abort(saga& s, instant now, decision& d) const;
  // Operator: re-drive every waiting call now.
  request_result retry_now(saga& s, instant now, decision& d) const;

  // Whether the saga can no longer be compensated.
  bool past_pivot(const saga& s) const;

 private:
  void advance(saga& s, instant now, decision& d) const;
  void run_forward(saga& s, instant now, decision& d, bool& again) const;
  void run_compensation(saga& s, instant now, decision& d, bool& again) const;
  void begin_compensation(saga& s, saga_error why, saga_state end) const;
  void finish(saga& s, saga_state end) const;
  void send(saga& s, const call_ref& ref, instant now, decision& d) const;
  void note_answer(call_progress& c, const step_def& st, bool undo, const answer& a, instant now) const;
  bool confirmed_past_hold(const saga& s) const;
  void expire_if_overdue(call_progress& c, const retry_policy& p, instant now) const;
  void update_attention(saga& s) const;
  outgoing_call make_call(const saga& s, const call_ref& ref) const;
  // A destination's credit: the source hold's lots, grouped by expiry.
  std::vector<lot_share> source_lots(const saga& s, std::size_t credit_step) const;
  std::int64_t amount_of(const saga& s, const step_def& st, std::size_t item) const;
  std::size_t items_of(const saga& s, const step_def& st) const;

  const workflow_def& workflow_;
  random_source random_;
};

}  // namespace tally::orch
