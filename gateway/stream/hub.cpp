#include "gateway/stream/hub.hpp"

#include <vector>

namespace tally::gateway {

void hub::add(const std::string& topic, subscriber* s) { topics_[topic].insert(s); }

void hub::remove(const std::string& topic, subscriber* s) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  it->second.erase(s);
  if (it->second.empty()) topics_.erase(it);
}

void hub::publish(const std::string& topic, std::int64_t version, const std::shared_ptr<const std::string>& frame,
                  bool resync) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return;
  // A delivery may close a slow session, which unsubscribes it from here.
  const std::vector<subscriber*> targets(it->second.begin(), it->second.end());
  for (auto* s : targets) s->deliver(topic, version, frame, resync);
}

}  // namespace tally::gateway
