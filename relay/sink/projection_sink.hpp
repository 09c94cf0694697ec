#pragma once
// Redis read projections of accounts and sagas. Each write is guarded by the
// object's version, in one Lua script per batch, so a late or repeated event
// never overwrites a newer state. The script refuses to write while the
// source's marker is missing (Redis flushed or replaced): the relay then
// rebuilds the source's objects from its database and sets the marker. A
// rebuild's pages and its marker are written only while its token is still
// in Redis: a second flush during a rebuild starts it over, instead of
// marking complete a Redis that holds only the pages after the flush.
//
// A settled saga's projection (completed, failed, compensated) expires
// `saga_ttl` after the event that settled it, so Redis holds the accounts
// and the sagas of the last `saga_ttl`; a read of an expired one goes to
// the saga store, as any missing projection does. Accounts and sagas still
// running never expire.
//
// Each object keeps the name of its source, so that after a source's
// failover its objects can be forgotten (a SCAN of every projection)
// before the rebuild.
#include <chrono>
#include <map>
#include <random>
#include <string>

#include "common/redis/client.hpp"
#include "relay/sink/sink.hpp"

namespace tally::relay {

// How long a projection written at `now_ms` lives, in ms: 0 for ever (an
// account, a saga not settled, or `saga_ttl` 0), else what is left of
// `saga_ttl` since the settling event at `event_ms`; -1 when nothing is
// left, and the write removes the projection instead.
std::int64_t projection_ttl_ms(bool settled, std::int64_t event_ms, std::int64_t now_ms,
                               std::chrono::milliseconds saga_ttl);

class projection_sink : public sink {
 public:
  projection_sink(redis::client& redis, std::chrono::milliseconds saga_ttl) : redis_(redis), saga_ttl_(saga_ttl) {}
  std::string_view name() const override { return "projection"; }
  boost::asio::awaitable<delivery> async_deliver(const std::string& source,
                                                 std::span<const outbox_event> events) override;
  boost::asio::awaitable<delivery> async_begin_rebuild(const std::string& source) override;
  boost::asio::awaitable<delivery> async_restore(const std::string& source,
                                                 std::span<const object_state> states) override;
  boost::asio::awaitable<delivery> async_finish_rebuild(const std::string& source) override;
  boost::asio::awaitable<delivery> async_check(const std::string& source) override;
  boost::asio::awaitable<delivery> async_forget(const std::string& source) override;

 private:
  boost::asio::awaitable<delivery> async_apply(const std::string& source, std::vector<std::string> keys,
                                               std::vector<std::string> args);
  redis::client& redis_;
  std::chrono::milliseconds saga_ttl_;
  std::map<std::string, std::string, std::less<>> rebuilding_;  // source → token of its rebuild
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace tally::relay
