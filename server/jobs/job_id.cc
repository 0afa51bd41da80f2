#include "server/jobs/job_id.h"

#include <cstdint>
#include <random>

#include "absl/base/const_init.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tomo::server {
namespace {

constexpr absl::string_view kPattern = "dddddddd-dddddd-dddddd-xxxxxxxxxxxx";

ABSL_CONST_INIT absl::Mutex id_mu(absl::kConstInit);
int64_t last_micros ABSL_GUARDED_BY(id_mu) = 0;

}  // namespace

std::string NewJobId() {
  int64_t micros = absl::ToUnixMicros(absl::Now());
  {
    absl::MutexLock lock(&id_mu);
    if (micros <= last_micros) micros = last_micros + 1;
    last_micros = micros;
  }
  std::random_device random;
  uint64_t bits = (uint64_t{random()} << 32 | random()) & ((uint64_t{1} << 48) - 1);
  absl::Time time = absl::FromUnixMicros(micros);
  return absl::StrCat(absl::FormatTime("%Y%m%d-%H%M%S", time, absl::UTCTimeZone()), "-",
                      absl::StrFormat("%06d-%012x", micros % 1000000, bits));
}

bool IsValidJobId(absl::string_view id) {
  if (id.size() != kPattern.size()) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    switch (kPattern[i]) {
      case 'd':
        if (!absl::ascii_isdigit(c)) return false;
        break;
      case 'x':
        if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
        break;
      default:
        if (c != kPattern[i]) return false;
    }
  }
  return true;
}

std::string QuoteJobId(absl::string_view id) {
  constexpr size_t kMax = 80;
  if (id.size() > kMax) {
    return absl::StrCat("\"", absl::CHexEscape(id.substr(0, kMax)), "...\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(id), "\"");
}

}  // namespace tomo::server
