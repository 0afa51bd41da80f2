#include "server/telemetry/log_rate_limit.h"

#include <algorithm>
#include <utility>

namespace tomo::server {

LogRateLimit::LogRateLimit(int max_lines, absl::Duration interval,
                           std::function<absl::Time()> now)
    : max_lines_(std::max(1, max_lines)), interval_(interval), now_(std::move(now)) {}

bool LogRateLimit::Admit(uint64_t* suppressed) {
  const absl::Time now = now_();
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= interval_) {
    window_start_ = now;
    written_in_window_ = 0;
  }
  if (written_in_window_ >= max_lines_) {
    ++suppressed_;
    return false;
  }
  ++written_in_window_;
  *suppressed = std::exchange(suppressed_, 0);
  return true;
}

}  // namespace tomo::server
