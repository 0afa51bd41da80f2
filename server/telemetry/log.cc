#include "server/telemetry/log.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/jobs/job_id.h"

namespace tomo::server {
namespace {

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void WriteLine(const std::string& line) {
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string Now() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

// The id of a message that starts "job <id>" (the form the daemon's messages about a job
// have always had); empty otherwise.
absl::string_view JobIdOf(absl::string_view message) {
  constexpr absl::string_view kPrefix = "job ";
  if (message.substr(0, kPrefix.size()) != kPrefix) return "";
  absl::string_view rest = message.substr(kPrefix.size());
  const size_t end = rest.find_first_of(" :,");
  absl::string_view id = rest.substr(0, end);
  return IsValidJobId(id) ? id : absl::string_view();
}

}  // namespace

LogValue::LogValue(absl::string_view text) : json_(JsonString(text)) {}

LogValue::LogValue(double value) {
  // JSON has no NaN or infinities: those become strings.
  if (!std::isfinite(value)) {
    json_ = JsonString(absl::StrCat(value));
    return;
  }
  for (int precision = 6; precision <= 17; ++precision) {
    json_ = absl::StrFormat("%.*g", precision, value);
    if (std::strtod(json_.c_str(), nullptr) == value) break;
  }
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

std::string FormatLogLine(absl::string_view ts, LogLevel level, absl::string_view event,
                          absl::string_view job_id, const LogFields& fields) {
  std::string line = absl::StrCat("{\"ts\":", JsonString(ts), ",\"level\":\"", LevelName(level),
                                  "\",\"event\":", JsonString(event));
  if (!job_id.empty()) absl::StrAppend(&line, ",\"job_id\":", JsonString(job_id));
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&line, ",", JsonString(key), ":", value.json());
  }
  line += "}";
  return line;
}

void LogEvent(LogLevel level, absl::string_view event, absl::string_view job_id,
              const LogFields& fields) {
  WriteLine(absl::StrCat(FormatLogLine(Now(), level, event, job_id, fields), "\n"));
}

void Log(absl::string_view message, LogLevel level) {
  LogEvent(level, "message", JobIdOf(message), {{"message", message}});
}

}  // namespace tomo::server
