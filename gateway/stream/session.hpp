#pragma once
// One WebSocket subscriber (GET /v1/stream): authenticated at the upgrade
// like any request (Authorization header, or ?api_key= for browsers),
// subscribed to its own tenant's sagas and accounts. On subscribe it gets
// each object's current state from the projection, then every newer state
// the relay pushes, once and in order, plus a ping frame every 20 s. A
// subscriber that falls too far behind is disconnected rather than
// buffered without bound.
#include <chrono>
#include <cstddef>
#include <list>
#include <memory>

#include <boost/beast/core/tcp_stream.hpp>

#include "common/http/server.hpp"
#include "common/metrics/metrics.hpp"
#include "common/redis/client.hpp"
#include "gateway/auth/api_keys.hpp"
#include "gateway/stream/hub.hpp"

namespace tally::gateway {

struct stream_options {
  std::chrono::milliseconds ping_interval{20000};
  std::size_t max_queued_frames = 4096;
  std::size_t max_subscriptions = 10000;
  std::chrono::milliseconds handshake_timeout{5000};
};

class stream_session;

// Everything sessions share; owns the list of live sessions so shutdown
// can close them.
class stream_service {
 public:
  stream_service(hub& h, const api_keys& keys, redis::client& redis, metrics::registry& metrics,
                 stream_options options);
  ~stream_service();
  // Takes over an upgrade request: a session when it asks for /v1/stream
  // with a valid key, else the API's 404 or 401 and the connection closed.
  void accept(boost::beast::tcp_stream stream, http::request req);
  void close_all();

 private:
  friend class stream_session;
  hub& hub_;
  const api_keys& keys_;
  redis::client& redis_;
  stream_options options_;
  metrics::gauge& open_;
  metrics::counter& frames_;
  metrics::counter& dropped_slow_;
  std::list<std::weak_ptr<stream_session>> live_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tally::gateway
