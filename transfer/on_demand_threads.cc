#include "transfer/on_demand_threads.h"

#include <algorithm>
#include <utility>

namespace tomo::transfer {

OnDemandThreads::OnDemandThreads(int count, absl::Duration idle_time, std::function<void()> loop)
    : idle_time_(idle_time), loop_(std::move(loop)), slots_(static_cast<size_t>(std::max(1, count))) {}

void OnDemandThreads::StartLocked() {
  if (running_ == static_cast<int>(slots_.size())) return;  // the busy pipeline's case
  for (Slot& slot : slots_) {
    if (slot.running) continue;
    if (slot.thread.joinable()) slot.thread.join();
    slot.running = true;
    ++running_;
    slot.thread = std::thread(loop_);
  }
}

void OnDemandThreads::ExitingLocked() {
  const std::thread::id self = std::this_thread::get_id();
  for (Slot& slot : slots_) {
    if (slot.running && slot.thread.get_id() == self) {
      slot.running = false;
      --running_;
      return;
    }
  }
}

void OnDemandThreads::Join() {
  const std::thread::id self = std::this_thread::get_id();
  for (Slot& slot : slots_) {
    if (!slot.thread.joinable()) continue;
    if (slot.thread.get_id() == self) {
      slot.thread.detach();
    } else {
      slot.thread.join();
    }
  }
}

}  // namespace tomo::transfer
