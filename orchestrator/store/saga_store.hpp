#pragma once
// The durable saga store (migrations/orchestrator/). Sagas are created
// idempotently on (tenant, type, biz_id) + request hash, held by one
// instance at a time through a lease, written back with the version they
// were read at (a write from an instance that lost its lease changes
// nothing), and claimed when due with FOR UPDATE SKIP LOCKED so instances
// never take the same saga. Every attempt of every call goes to saga_step,
// every state change to the outbox, in the same transaction.
//
// Times are the caller's clock (the engine's), in milliseconds, so a
// simulation can drive the store as well.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/pg/pool.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

struct stored_saga {
  saga s;
  saga_type type = saga_type::credit;
  std::string request_hash;
  std::int64_t version = 0;
  instant updated{};
};

// One attempt of one call, as it is recorded (sent, then answered).
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
  std::int64_t version = 0;  // the version this instance read or last wrote
  bool state_changed = false;  // writes an outbox event
  bool keep_lease = true;      // false: any instance may claim it when due
  std::vector<step_attempt> attempts;
};

class saga_store {
 public:
  saga_store(pg::pool& pool, std::string owner, std::chrono::milliseconds lease, std::chrono::milliseconds timeout)
      : pool_(pool), owner_(std::move(owner)), lease_(lease), timeout_(timeout) {}

  const std::string& owner() const { return owner_; }

  enum class created { inserted, replayed, conflict };
  struct create_result {
    pg::error error;
    created outcome = created::inserted;
    stored_saga saga;  // inserted: the new saga (leased to this instance); else the existing one
  };
  // Inserts `s` (already started by the engine), leased to this instance.
  boost::asio::awaitable<create_result> async_create(const saga& s, saga_type type, std::string request_hash,
                                                     instant now);

  struct save_result {
    pg::error error;
    std::vector<std::int64_t> versions;  // per write: the new version, 0 when the saga was lost to another instance
  };
  // Writes every saga in one transaction.
  boost::asio::awaitable<save_result> async_save(std::span<const saga_write> writes, instant now);

  struct load_result {
    pg::error error;
    std::vector<stored_saga> sagas;
  };
  // Leases up to `limit` sagas that are due and not held by a live lease.
  boost::asio::awaitable<load_result> async_claim(std::size_t limit, instant now);
  // Extends this instance's leases; returns how many it holds.
  boost::asio::awaitable<pg::error> async_renew(instant now, std::int64_t& held);
  // One saga by id (any tenant: callers check).
  boost::asio::awaitable<load_result> async_get(std::string saga_id);

 private:
  pg::pool& pool_;
  std::string owner_;
  std::chrono::milliseconds lease_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tally::orch
