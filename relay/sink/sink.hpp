#pragma once
// Where the relay delivers a source's events. A delivery is all or nothing
// from the relay's view: a failed one is retried whole, so sinks must apply
// an event at most once (version guards, event ids).
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "relay/outbox/event.hpp"
#include "relay/outbox/reader.hpp"

namespace tally::relay {

enum class delivery_status {
  delivered,
  retry,    // the sink is unreachable or refused: try again later
  rebuild,  // the sink lost its state (Redis flushed): rebuild it first
};

struct delivery {
  delivery_status status = delivery_status::delivered;
  std::string error;
};

class sink {
 public:
  virtual ~sink() = default;
  virtual std::string_view name() const = 0;
  virtual boost::asio::awaitable<delivery> async_deliver(const std::string& source,
                                                         std::span<const outbox_event> events) = 0;
  // A rebuild: begin, current object states page by page, then the mark that
  // the source's state is complete again. Only sinks that answer `rebuild`
  // need them. `rebuild` from a page or the finish: the sink lost its state
  // again during the rebuild, which must start over.
  virtual boost::asio::awaitable<delivery> async_begin_rebuild(const std::string& source);
  virtual boost::asio::awaitable<delivery> async_restore(const std::string& source,
                                                         std::span<const object_state> states);
  virtual boost::asio::awaitable<delivery> async_finish_rebuild(const std::string& source);
  // Asked while the source is idle: `rebuild` when the sink lost its state
  // although no event has come to find it out.
  virtual boost::asio::awaitable<delivery> async_check(const std::string& source);
  // Before a rebuild after the source's failover: drop every object of the
  // source, since some may come from events the new primary never got (a
  // rebuild alone keeps whatever holds a higher version).
  virtual boost::asio::awaitable<delivery> async_forget(const std::string& source);
};

}  // namespace tally::relay
