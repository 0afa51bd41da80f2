#include "server/jobs/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/jobs/job_id.h"
#include "server/security/tenant_keys.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

bool IsTerminal(pb::JobState state) {
  return state == pb::JOB_STATE_SUCCEEDED || state == pb::JOB_STATE_FAILED ||
         state == pb::JOB_STATE_CANCELLED;
}

bool IsUnfinished(pb::JobState state) {
  return state == pb::JOB_STATE_UPLOADING || state == pb::JOB_STATE_QUEUED ||
         state == pb::JOB_STATE_RUNNING;
}

void SetTimestamp(google::protobuf::Timestamp* timestamp, absl::Time time) {
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp->set_seconds(nanos / 1000000000);
  timestamp->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

JobTable::~JobTable() { Close(); }

void JobTable::Open(std::unique_ptr<JobStore> store, std::function<bool()> free_emergency_space) {
  store_ = std::move(store);
  writer_ = std::make_unique<JobStoreWriter>(*store_, std::move(free_emergency_space),
                                             [this](Ticket ticket) { OnDurable(ticket); });
}

void JobTable::Close() {
  if (writer_ == nullptr) return;
  writer_->Stop();
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  // From now on a write ends before Enqueue returns: every event can be told at once.
  closed_ = true;
  TellAllDurableLocked(writer_->ended(), flushes);
}

absl::StatusOr<JobRecord*> JobTable::Find(absl::string_view id) {
  auto it = records_.find(id);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", QuoteJobId(id), " not found"));
  }
  return &it->second;
}

absl::StatusOr<const JobRecord*> JobTable::Find(absl::string_view id) const {
  auto it = records_.find(id);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", QuoteJobId(id), " not found"));
  }
  return &it->second;
}

JobTable::Ticket JobTable::Write(JobRecord& record, const pb::Job& next) {
  const StoredJob stored{next, record.cancel_requested, record.last_event.sequence() + 1};
  if (writer_ == nullptr) return 0;  // recovery writes to the store itself
  const Ticket ticket = writer_->Enqueue(JobStoreWrite::Put(stored));
  record.last_ticket = std::max(record.last_ticket, ticket);
  return ticket;
}

JobTable::Ticket JobTable::WriteDelete(const std::string& id) {
  if (writer_ == nullptr) return 0;
  return writer_->Enqueue(JobStoreWrite::Delete(id));
}

JobTable::Ticket JobTable::Commit(JobRecord& record, pb::Job next, const std::string& message,
                                  Durability durability, WatcherFlushes& flushes) {
  Ticket ticket = 0;
  if (durability == Durability::kPersist) {
    ticket = Write(record, next);
  }
  if (on_change_) on_change_(record, next, message);
  record.job = std::move(next);
  pb::JobEvent event;
  event.set_job_id(record.job.id());
  event.set_sequence(record.last_event.sequence() + 1);
  event.set_state(record.job.state());
  *event.mutable_progress() = record.job.progress();
  event.set_message(message);
  SetTimestamp(event.mutable_time(), absl::Now());
  record.last_event = event;
  // Told once every write of the job so far is durable, behind its untold events.
  const Ticket needed = record.last_ticket;
  if (record.untold.empty() && (needed <= told_upto_ || closed_ || writer_ == nullptr)) {
    TellLocked(record, event, flushes);
  } else {
    record.untold.emplace_back(needed, std::move(event));
    untold_.insert(record.job.id());
  }
  return ticket;
}

void JobTable::TellLocked(JobRecord& record, const pb::JobEvent& event, WatcherFlushes& flushes) {
  record.last_told = event;
  for (JobWatcher* watcher : record.watchers) {
    if (watcher->Enqueue(event)) flushes.Add(watcher);
  }
  if (IsTerminal(event.state())) record.watchers.clear();
}

void JobTable::TellDurableLocked(JobRecord& record, Ticket durable, WatcherFlushes& flushes) {
  while (!record.untold.empty() && record.untold.front().first <= durable) {
    pb::JobEvent event = std::move(record.untold.front().second);
    record.untold.pop_front();
    TellLocked(record, event, flushes);
  }
}

void JobTable::OnDurable(Ticket ticket) {
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  TellAllDurableLocked(ticket, flushes);
}

void JobTable::TellAllDurableLocked(Ticket ticket, WatcherFlushes& flushes) {
  told_upto_ = std::max(told_upto_, ticket);
  for (auto it = untold_.begin(); it != untold_.end();) {
    auto record = records_.find(*it);
    if (record != records_.end()) TellDurableLocked(record->second, ticket, flushes);
    if (record == records_.end() || record->second.untold.empty()) {
      it = untold_.erase(it);
    } else {
      ++it;
    }
  }
}

JobTable::RecordMap::iterator JobTable::Erase(RecordMap::iterator it, const absl::Status& status,
                                              WatcherFlushes& flushes) {
  JobRecord& record = it->second;
  if (on_erase_) on_erase_(record);
  // Removed: what it has not told yet is told now (a job deleted right after it ended, before
  // that end was durable, still shows its watchers the end), and a watch still open ends.
  while (!record.untold.empty()) {
    pb::JobEvent event = std::move(record.untold.front().second);
    record.untold.pop_front();
    TellLocked(record, event, flushes);
  }
  const absl::Status closing =
      status.ok() ? absl::AbortedError(absl::StrCat("job ", it->first, " was removed")) : status;
  for (JobWatcher* watcher : record.watchers) {
    if (watcher->Close(closing)) flushes.Add(watcher);
  }
  record.watchers.clear();
  const std::string key =
      ScopedIdempotencyKey(record.job.tenant(), record.job.spec().idempotency_key());
  if (!key.empty()) {
    auto known = keys_.find(key);
    if (known != keys_.end() && known->second == it->first) keys_.erase(known);
  }
  untold_.erase(it->first);
  return records_.erase(it);
}

absl::Status JobTable::WaitDurable(Ticket ticket) {
  if (ticket == 0 || writer_ == nullptr) return absl::OkStatus();
  return writer_->Wait(ticket);
}

absl::Status JobTable::Watch(absl::string_view id, JobWatcher* watcher) {
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  auto found = Find(id);
  if (!found.ok()) return found.status();
  JobRecord& record = **found;
  // A job whose first change is still on its way to the disk has told nothing yet: that
  // event comes first.
  if (!record.last_told.job_id().empty()) {
    if (watcher->Enqueue(record.last_told)) flushes.Add(watcher);
    if (IsTerminal(record.last_told.state())) return absl::OkStatus();
  }
  if (watches_closed_) {
    // Every watch was closed: nothing will change any more.
    watcher->Close(watches_closed_status_);
  } else {
    record.watchers.push_back(watcher);
  }
  return absl::OkStatus();
}

void JobTable::Unwatch(absl::string_view id, JobWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return;
  auto& watchers = it->second.watchers;
  watchers.erase(std::remove(watchers.begin(), watchers.end(), watcher), watchers.end());
}

void JobTable::CloseWatches(const absl::Status& status) {
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  watches_closed_ = true;
  watches_closed_status_ = status;
  for (auto& [id, record] : records_) {
    for (JobWatcher* watcher : record.watchers) {
      if (watcher->Close(status)) flushes.Add(watcher);
    }
    record.watchers.clear();
  }
}

size_t JobTable::watcher_count() const {
  absl::MutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [id, record] : records_) count += record.watchers.size();
  return count;
}

}  // namespace tomo::server
