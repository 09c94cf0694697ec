#pragma once
// Pushes events to one gateway, which fans them out to its WebSocket
// subscribers: POST /internal/events on its internal port with the internal
// token, in requests of at most about 1 MiB. The gateway
// keeps, per subscriber and object, the newest version sent, so events
// delivered twice (a relay restart, two relays at a handover) are dropped
// there. After the source's failover the pump rebuilds this sink: every
// object's current state, pushed as a resync.
#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "common/http/client_pool.hpp"
#include "relay/sink/sink.hpp"

namespace tally::relay {

class push_sink : public sink {
 public:
  push_sink(boost::asio::any_io_executor ex, std::string name, std::string host, std::uint16_t port, std::string token,
            std::chrono::milliseconds timeout);
  std::string_view name() const override { return name_; }
  boost::asio::awaitable<delivery> async_deliver(const std::string& source,
                                                 std::span<const outbox_event> events) override;
  boost::asio::awaitable<delivery> async_restore(const std::string& source,
                                                 std::span<const object_state> states) override;

 private:
  boost::asio::awaitable<delivery> async_post(std::vector<std::string> bodies);
  std::string name_;
  http::client_pool clients_;  // each source's consumer pushes on its own connection
  std::string token_;
  std::chrono::milliseconds timeout_;
};

// The request bodies: {"source": "s0", "events": [{"event_id", "kind",
// "tenant", "id", "version", "doc"}]}, documents inserted as they are, a new
// body once one reaches `max_bytes` (an event larger than that goes alone).
std::vector<std::string> push_bodies(const std::string& source, std::span<const outbox_event> events,
                                     std::size_t max_bytes);
// The same for a rebuild's page of object states, marked {"resync": true}
// (and without event ids): the gateway sends each subscribed object's
// state even when it sent that version or a higher one before, since the
// higher one may come from an event that the source lost in a failover.
std::vector<std::string> resync_bodies(const std::string& source, std::span<const object_state> states,
                                       std::size_t max_bytes);

}  // namespace tally::relay
