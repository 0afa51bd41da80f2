// LogRateLimit: at most max_lines log lines of one kind per interval, so that a client that
// repeats a refused call thousands of times a second (a missing or wrong token) cannot fill
// tomod's log and its disk. The lines left out are counted: the next line written carries
// that count (LogEvent field "suppressed"), so the log still says how many there were;
// counters in the metrics (tomod_calls_unauthenticated_total) count every one.
//
// Windows of `interval` from the first line: within one, the first max_lines lines are
// written and the rest counted.
//
//   LogRateLimit limit(10, absl::Seconds(10));
//   uint64_t suppressed = 0;
//   if (limit.Admit(&suppressed)) {
//     LogFields fields = {{"peer", peer}};
//     if (suppressed > 0) fields.emplace_back("suppressed", suppressed);
//     LogEvent(LogLevel::kWarning, "unauthenticated", "", fields);
//   }
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tomo::server {

class LogRateLimit {
 public:
  // max_lines of at least 1; now: the clock (tests give their own).
  LogRateLimit(int max_lines, absl::Duration interval,
               std::function<absl::Time()> now = [] { return absl::Now(); });

  // true: write the line, and *suppressed gets how many were left out since the last one
  // written (0 if none); false: leave it out (counted).
  bool Admit(uint64_t* suppressed);

  int max_lines() const { return max_lines_; }
  absl::Duration interval() const { return interval_; }

 private:
  const int max_lines_;
  const absl::Duration interval_;
  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int written_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tomo::server
