#include "server/uploads/idle_uploads.h"

#include <algorithm>
#include <vector>

namespace tomo::server {

IdleUploads::IdleUploads(absl::Duration timeout) : timeout_(timeout) {
  if (timeout_ > absl::ZeroDuration()) thread_ = std::thread([this] { Loop(); });
}

IdleUploads::~IdleUploads() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<IdleUploads::Entry> IdleUploads::Register(grpc::CallbackServerContext* context) {
  std::shared_ptr<Entry> entry(new Entry(context));
  absl::MutexLock lock(&mu_);
  entries_.insert(entry);
  return entry;
}

void IdleUploads::Unregister(const std::shared_ptr<Entry>& entry) {
  {
    std::lock_guard<std::recursive_mutex> lock(entry->mu_);
    entry->context_ = nullptr;
  }
  absl::MutexLock lock(&mu_);
  entries_.erase(entry);
}

void IdleUploads::Loop() {
  // A few checks per timeout: a stream ends between 1 and 1.25 timeouts after its client's
  // last message.
  const absl::Duration interval =
      std::clamp(timeout_ / 4, absl::Milliseconds(50), absl::Seconds(5));
  for (;;) {
    std::vector<std::shared_ptr<Entry>> idle;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
      const int64_t cutoff = absl::GetCurrentTimeNanos() - absl::ToInt64Nanoseconds(timeout_);
      for (const std::shared_ptr<Entry>& entry : entries_) {
        const int64_t since = entry->waiting_since_ns_.load();
        if (since != 0 && since < cutoff && !entry->reaped_.load()) idle.push_back(entry);
      }
    }
    // Outside mu_: the reactor's reactions may run here and unregister.
    for (const std::shared_ptr<Entry>& entry : idle) {
      std::lock_guard<std::recursive_mutex> lock(entry->mu_);
      if (entry->context_ == nullptr) continue;
      entry->reaped_.store(true);
      entry->context_->TryCancel();
    }
  }
}

}  // namespace tomo::server
