// tomod's log: one JSON object per line on stderr, for log collectors (journald, Loki,
// Elasticsearch) to read without patterns:
//
//   {"ts":"2024-05-17T10:30:45.123Z","level":"info","event":"job_state",
//    "job_id":"20240517-103045-...","from":"queued","to":"running","message":"running on cpu"}
//
// ts (UTC, milliseconds), level and event always come first, job_id when there is one,
// then the fields in the order given. Strings are JSON-escaped (quotes, backslashes,
// control characters); bytes that are not UTF-8 pass through unchanged. Thread-safe;
// lines never interleave.
//
//   LogEvent(LogLevel::kInfo, "job_state", id, {{"from", "queued"}, {"to", "running"}});
//   Log(absl::StrCat("job ", id, " deleted"));   // event "message"; job_id taken from
//                                                // a message that starts "job <id>"
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace tomo::server {

enum class LogLevel { kInfo, kWarning, kError };

// A field's value, rendered as JSON: a string, a number or a boolean.
class LogValue {
 public:
  LogValue(absl::string_view text);  // NOLINT: implicit, for brace lists
  LogValue(const char* text) : LogValue(absl::string_view(text)) {}  // NOLINT
  LogValue(const std::string& text) : LogValue(absl::string_view(text)) {}  // NOLINT
  LogValue(bool value) : json_(value ? "true" : "false") {}  // NOLINT
  LogValue(double value);  // NOLINT
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> &&
                                                    !std::is_same_v<T, bool>>>
  LogValue(T value) : json_(std::to_string(value)) {}  // NOLINT
  const std::string& json() const { return json_; }

 private:
  std::string json_;
};

using LogFields = std::vector<std::pair<std::string, LogValue>>;

void LogEvent(LogLevel level, absl::string_view event, absl::string_view job_id = "",
              const LogFields& fields = {});

// A free-text line: event "message", the text as field "message".
void Log(absl::string_view message, LogLevel level = LogLevel::kInfo);

// The line LogEvent writes, without the newline (for tests).
std::string FormatLogLine(absl::string_view ts, LogLevel level, absl::string_view event,
                          absl::string_view job_id, const LogFields& fields);
// text as a JSON string literal, quotes included.
std::string JsonString(absl::string_view text);

}  // namespace tomo::server
