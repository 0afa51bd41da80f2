// JobQueue: the jobs waiting for a device, highest priority first and first come, first
// served within a priority. A plain value, not thread-safe: JobManager guards it with its
// mutex. PopFirst takes a predicate so that a scheduler can skip jobs that do not fit a
// device (admission by memory estimate) without losing their place.
//
//   JobQueue queue;
//   queue.Push("a", 0);
//   queue.Push("b", 10);
//   queue.PeekFirst();         // "b", still queued
//   queue.PopFirst();          // "b"
//   queue.Remove("a");         // true
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tomo::server {

class JobQueue {
 public:
  // Appends id behind every queued job of the same or a higher priority. An id that is
  // already queued keeps its old place.
  void Push(const std::string& id, int32_t priority);
  // Removes and returns the first job in run order for which fits(id) holds (any job when
  // fits is empty); nullopt when there is none.
  std::optional<std::string> PopFirst(const std::function<bool(const std::string&)>& fits = {});
  // The job PopFirst(fits) would return, left queued (InputPrefetcher reads its input ahead).
  std::optional<std::string> PeekFirst(
      const std::function<bool(const std::string&)>& fits = {}) const;
  // False when id is not queued.
  bool Remove(const std::string& id);
  bool Contains(const std::string& id) const { return keys_.count(id) > 0; }
  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }
  // Ids in the order they would run.
  std::vector<std::string> Ids() const;

 private:
  struct Key {
    int32_t priority;
    uint64_t arrival;
    bool operator<(const Key& other) const {
      if (priority != other.priority) return priority > other.priority;
      return arrival < other.arrival;
    }
  };
  std::map<Key, std::string> order_;
  std::unordered_map<std::string, Key> keys_;
  uint64_t next_arrival_ = 0;
};

}  // namespace tomo::server
