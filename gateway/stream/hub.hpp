#pragma once
// Who is subscribed to what on this gateway: topics (tenant-scoped object
// keys) to sessions. The relay's pushed events are published here; each
// session filters by version and queues the frame.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace tally::gateway {

class subscriber {
 public:
  virtual ~subscriber() = default;
  virtual void deliver(const std::string& topic, std::int64_t version, const std::shared_ptr<const std::string>& frame,
                       bool resync) = 0;
};

class hub {
 public:
  void add(const std::string& topic, subscriber* s);
  void remove(const std::string& topic, subscriber* s);
  // `resync`: see version_filter.
  void publish(const std::string& topic, std::int64_t version, const std::shared_ptr<const std::string>& frame,
               bool resync = false);
  bool has(const std::string& topic) const { return topics_.contains(topic); }

 private:
  std::unordered_map<std::string, std::unordered_set<subscriber*>> topics_;
};

}  // namespace tally::gateway
