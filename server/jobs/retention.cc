#include "server/jobs/retention.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/telemetry/log.h"

namespace tomo::server {

size_t Retention::SweepExpired() {
  if (options_.result_ttl <= absl::ZeroDuration()) return 0;
  std::vector<std::pair<std::string, JobTable::Ticket>> expired;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&table_.mu());
    if (!table_.is_open()) return 0;
    const absl::Time cutoff = absl::Now() - options_.result_ttl;
    JobTable::RecordMap& records = table_.records();
    for (auto it = records.begin(); it != records.end();) {
      const tomoserve::v1::Job& job = it->second.job;
      if (!IsTerminal(job.state()) || !job.has_finished() ||
          FromTimestamp(job.finished()) > cutoff) {
        ++it;
        continue;
      }
      expired.emplace_back(it->first, table_.WriteDelete(it->first));
      it = table_.Erase(it, absl::OkStatus(), flushes);
    }
  }
  size_t deleted = 0;
  for (const auto& [id, ticket] : expired) {
    if (absl::Status erased = table_.WaitDurable(ticket); !erased.ok()) {
      // Its files stay; the record comes back at the next start, and goes at that sweep.
      Log(absl::StrCat("retention: cannot delete job ", id, ": ", erased.message(),
                       "; it is deleted again after the next start"));
      continue;
    }
    absl::Status removed = spool_.RemoveJobDir(id);
    Log(absl::StrCat("job ", id, " deleted: it ended more than --result_ttl ",
                     absl::FormatDuration(options_.result_ttl), " ago",
                     removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
    ++deleted;
  }
  return deleted;
}

void Retention::Start() {
  if (options_.result_ttl <= absl::ZeroDuration()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Retention::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Retention::Loop() {
  absl::Duration interval = options_.sweep_interval;
  if (interval <= absl::ZeroDuration()) {
    interval = std::clamp(options_.result_ttl / 10, absl::Milliseconds(100), absl::Minutes(1));
  }
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
    }
    SweepExpired();
  }
}

}  // namespace tomo::server
