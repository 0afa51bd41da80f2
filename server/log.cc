#include "server/log.h"

#include <cstdio>
#include <string>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tomo::server {

void Log(absl::string_view message) {
  static absl::Mutex mu(absl::kConstInit);
  std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
                   " tomod: ", message, "\n");
  absl::MutexLock lock(&mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tomo::server
