#pragma once
// The durable saga store (migrations/orchestrator/). Sagas are created
// idempotently on (tenant, type, biz_id) + request hash, held by one
// instance at a time through a lease (valid while the instance's heartbeat
// is fresh), written back with the version they
// were read at (a write from an instance that lost its lease changes
// nothing), and claimed when due with FOR UPDATE SKIP LOCKED so instances
// never take the same saga. Every attempt of every call goes to saga_step,
// every state change to the outbox, in the same transaction.
//
// Times are the caller's clock (the engine's), in milliseconds, so a
// simulation can drive the store as well.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/contract/enum_names.hpp"
#include "common/pg/pool.hpp"
#include "orchestrator/engine/engine.hpp"
#include "orchestrator/store/saga_list.hpp"

namespace tally::orch {

struct stored_saga {
  saga s;
  saga_type type = saga_type::credit;
  std::string request_hash;
  std::int64_t version = 0;
  instant updated{};
};

// One attempt of one call, recorded once answered (rows written before
// issue 28 may hold an attempt sent and never answered).
struct step_attempt {
  std::string step;
  std::size_t item = 0;
  bool undo = false;
  int attempt = 1;
  std::string shard;
  std::string command;  // JSON text
  instant sent{};
  std::optional<std::string> outcome;  // once answered
  std::string code;
  std::optional<instant> answered;
};

struct saga_write {
  const saga* s = nullptr;
  std::int64_t version = 0;            // the version this instance read or last wrote
  bool state_changed = false;          // writes an outbox event
  bool keep_lease = true;              // false: any instance may claim it when due
  std::vector<step_attempt> attempts;  // answered since the last write (none for a create)
  // Set: inserts the saga (leased to this instance) unless its
  // (tenant, type, biz_id) exists.
  std::optional<saga_type> create{};
  std::string request_hash{};
};

// An app's or operator's request for a saga another instance may hold.
TALLY_NAMED_ENUM(saga_action, confirm, cancel, abort, retry);
constexpr std::optional<saga_action> saga_action_from(std::string_view s) {
  return contract::value_of(saga_action_names, s);
}

// How an action ended, as the holder recorded it.
std::string_view to_string(engine::request_result r);
std::optional<engine::request_result> request_result_from(std::string_view s);

// The channels the store NOTIFYs on, in the transaction of the change.
// Recorded or put back: the saga id; settled: the action id.
inline constexpr std::string_view action_requested_channel = "tally_action_requested";
inline constexpr std::string_view action_settled_channel = "tally_action_settled";

struct pending_action {
  std::int64_t id = 0;
  std::string saga_id;
  saga_action action = saga_action::retry;
};

class saga_store {
 public:
  // With require_synchronous_standby every save first runs
  // pg::sql_require_synchronous_standby (docs/ha.md).
  saga_store(pg::pool& pool, std::string owner, std::chrono::milliseconds lease, std::chrono::milliseconds timeout,
             bool require_synchronous_standby = false)
      : pool_(pool),
        owner_(std::move(owner)),
        lease_(lease),
        timeout_(timeout),
        require_synchronous_standby_(require_synchronous_standby) {}

  const std::string& owner() const { return owner_; }
  // For a connection of its own (LISTEN).
  const std::string& conninfo() const { return pool_.options().conninfo; }

  enum class created { inserted, replayed, conflict };
  struct create_result {
    pg::error error;
    created outcome = created::inserted;
    stored_saga saga;  // inserted: the new saga (leased to this instance); else the existing one
  };
  // Inserts `s` (already started by the engine), leased to this instance.
  boost::asio::awaitable<create_result> async_create(const saga& s, saga_type type, std::string request_hash,
                                                     instant now);
  // After a create found its key taken: the saga that holds it, replayed
  // (the same request hash) or conflict.
  boost::asio::awaitable<create_result> async_existing(std::string tenant, saga_type type, std::string biz_id,
                                                       std::string request_hash);

  struct save_result {
    pg::error error;
    // Per write: the new version; 0 when the saga was lost to another
    // instance, or (a create) when its key exists already.
    std::vector<std::int64_t> versions;
  };
  // Writes (and creates) every saga in one transaction.
  boost::asio::awaitable<save_result> async_save(std::span<const saga_write> writes, instant now);

  struct load_result {
    pg::error error;
    std::vector<stored_saga> sagas;
    std::vector<pending_action> actions;  // async_claim: the actions taken
  };
  // Leases up to `limit` sagas that are due and not held by a live lease,
  // and, in the same transaction, takes the pending actions of every saga
  // this instance now holds.
  boost::asio::awaitable<load_result> async_claim(std::size_t limit, instant now);
  // The instance's heartbeat: extends every lease it holds (one row).
  boost::asio::awaitable<pg::error> async_renew(instant now);
  // Gives up one saga's lease (one this instance stopped driving).
  boost::asio::awaitable<pg::error> async_release(std::string saga_id);
  // One saga by id (any tenant: callers check).
  boost::asio::awaitable<load_result> async_get(std::string saga_id);
  struct counts_result {
    pg::error error;
    std::map<saga_state, std::int64_t> by_state;  // states without sagas are absent
    std::int64_t overdue = 0;                     // as saga_filter::overdue_at, at `now`
  };
  // How many of the tenant's sagas are in each state, from the counts the
  // statements writing sagas keep (no scan of the sagas), and how many are
  // overdue (from the sagas still on their way, through saga_by_state).
  boost::asio::awaitable<counts_result> async_counts(std::string tenant, instant now);
  // Every refund saga of the tenant whose original is `saga_id`, in any state.
  boost::asio::awaitable<load_result> async_refunds_of(std::string tenant, std::string saga_id);
  // Sagas matching the filter, newest first unless it says oldest first
  // (store/saga_list.hpp).
  boost::asio::awaitable<load_result> async_list(saga_filter f);

  struct attempts_result {
    pg::error error;
    std::vector<step_attempt> attempts;
  };
  // Every recorded attempt of a saga, in the order they were sent.
  boost::asio::awaitable<attempts_result> async_attempts(std::string saga_id);

  // Folds the state counts of writing sessions that ended into slot 0, so
  // the counts keep a row per tenant and state and live session.
  boost::asio::awaitable<pg::error> async_fold_counts();
  struct compact_result {
    pg::error error;
    std::int64_t sagas_read = 0;  // sagas with attempts in the page read
    std::int64_t sagas = 0;       // of those, the ones compacted
    std::int64_t attempts = 0;    // attempts removed
    std::string last;             // the page's last saga id: where the next page starts
  };
  // Removes the recorded attempts of the settled sagas among the next
  // `limit` sagas with attempts after `after`, created and settled before
  // `before`. A saga's row (its input, progress and result) stays: replays,
  // conflicts and refunds read it.
  boost::asio::awaitable<compact_result> async_compact(instant before, std::string after, std::size_t limit);

  // Gives up every lease of this instance (at shutdown: its heartbeat goes),
  // so that others take the sagas at once instead of after it expires.
  boost::asio::awaitable<pg::error> async_release_all();

  // Records an action for whichever instance holds (or next claims) the
  // saga, and makes the saga due now (a save keeps it due while an action
  // is pending); notifies action_requested_channel. Returns the action's id.
  boost::asio::awaitable<pg::error> async_request_action(std::string saga_id, saga_action action, instant now,
                                                         std::int64_t& id);
  // Puts back a taken action whose saga this instance no longer drives,
  // and makes the saga due, so whoever holds or claims it takes it
  // (notifies action_requested_channel).
  boost::asio::awaitable<pg::error> async_return_action(std::int64_t id, instant now);
  // Records how a taken action ended; notifies action_settled_channel.
  boost::asio::awaitable<pg::error> async_finish_action(std::int64_t id, engine::request_result result);
  // The action's result once finished, else none.
  boost::asio::awaitable<pg::error> async_action_result(std::int64_t id, std::optional<engine::request_result>& result);

 private:
  // One statement on a pooled connection.
  boost::asio::awaitable<pg::error> query(std::string_view sql, std::vector<pg::param> params, pg::result& out);

  pg::pool& pool_;
  std::string owner_;
  std::chrono::milliseconds lease_;
  std::chrono::milliseconds timeout_;
  bool require_synchronous_standby_;
};

}  // namespace tally::orch
