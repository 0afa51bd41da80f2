#include "server/jobs/job_queue.h"

namespace tomo::server {

void JobQueue::Push(const std::string& id, int32_t priority) {
  if (keys_.count(id) > 0) return;
  Key key{priority, next_arrival_++};
  order_.emplace(key, id);
  keys_.emplace(id, key);
}

std::optional<std::string> JobQueue::PopFirst(
    const std::function<bool(const std::string&)>& fits) {
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (fits && !fits(it->second)) continue;
    std::string id = std::move(it->second);
    order_.erase(it);
    keys_.erase(id);
    return id;
  }
  return std::nullopt;
}

std::optional<std::string> JobQueue::PeekFirst(
    const std::function<bool(const std::string&)>& fits) const {
  for (const auto& [key, id] : order_) {
    if (!fits || fits(id)) return id;
  }
  return std::nullopt;
}

bool JobQueue::Remove(const std::string& id) {
  auto it = keys_.find(id);
  if (it == keys_.end()) return false;
  order_.erase(it->second);
  keys_.erase(it);
  return true;
}

std::vector<std::string> JobQueue::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(order_.size());
  for (const auto& [key, id] : order_) ids.push_back(id);
  return ids;
}

}  // namespace tomo::server
