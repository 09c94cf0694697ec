#pragma once
// Redis read projections of accounts and sagas. Each write is guarded by the
// object's version, in one Lua script per batch, so a late or repeated event
// never overwrites a newer state. The script refuses to write while the
// source's marker is missing (Redis flushed or replaced): the relay then
// rebuilds the source's objects from its database and sets the marker. A
// rebuild's pages and its marker are written only while its token is still
// in Redis: a second flush during a rebuild starts it over, instead of
// marking complete a Redis that holds only the pages after the flush.
#include <map>
#include <random>
#include <string>

#include "common/redis/client.hpp"
#include "relay/sink/sink.hpp"

namespace tally::relay {

class projection_sink : public sink {
 public:
  explicit projection_sink(redis::client& redis) : redis_(redis) {}
  std::string_view name() const override { return "projection"; }
  boost::asio::awaitable<delivery> async_deliver(const std::string& source,
                                                 std::span<const outbox_event> events) override;
  boost::asio::awaitable<delivery> async_begin_rebuild(const std::string& source) override;
  boost::asio::awaitable<delivery> async_restore(const std::string& source,
                                                 std::span<const object_state> states) override;
  boost::asio::awaitable<delivery> async_finish_rebuild(const std::string& source) override;
  boost::asio::awaitable<delivery> async_check(const std::string& source) override;

 private:
  boost::asio::awaitable<delivery> async_apply(const std::string& source, std::vector<std::string> keys,
                                               std::vector<std::string> args);
  redis::client& redis_;
  std::map<std::string, std::string, std::less<>> rebuilding_;  // source → token of its rebuild
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace tally::relay
