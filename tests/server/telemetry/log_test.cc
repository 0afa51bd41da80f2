#include "server/telemetry/log.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(LogTest, OneJsonObjectWithTsLevelEventJobIdThenFieldsInOrder) {
  const std::string line = FormatLogLine("2024-05-17T10:30:45.123Z", LogLevel::kWarning,
                                         "job_state", "20240517-103045-000001-ab",
                                         {{"from", "queued"},
                                          {"to", "running"},
                                          {"attempts", uint32_t{2}},
                                          {"ok", true},
                                          {"seconds", 1.25}});
  EXPECT_EQ(line,
            "{\"ts\":\"2024-05-17T10:30:45.123Z\",\"level\":\"warning\",\"event\":\"job_state\","
            "\"job_id\":\"20240517-103045-000001-ab\",\"from\":\"queued\",\"to\":\"running\","
            "\"attempts\":2,\"ok\":true,\"seconds\":1.25}");
  // Without a job there is no job_id key.
  EXPECT_EQ(FormatLogLine("t", LogLevel::kInfo, "message", "", {{"message", "stopped"}}),
            "{\"ts\":\"t\",\"level\":\"info\",\"event\":\"message\",\"message\":\"stopped\"}");
}

TEST(LogTest, StringsAreJsonEscaped) {
  EXPECT_EQ(JsonString("a\"b\\c\nd\re\tf"), "\"a\\\"b\\\\c\\nd\\re\\tf\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString("µm"), "\"µm\"");  // UTF-8 passes through
  EXPECT_EQ(FormatLogLine("t", LogLevel::kError, "e\"vent", "", {{"k\"ey", "v"}}),
            "{\"ts\":\"t\",\"level\":\"error\",\"event\":\"e\\\"vent\",\"k\\\"ey\":\"v\"}");
}

TEST(LogTest, NumbersAreJsonNumbersExceptNonFinite) {
  EXPECT_EQ(LogValue(int64_t{-5}).json(), "-5");
  EXPECT_EQ(LogValue(uint64_t{18446744073709551615u}).json(), "18446744073709551615");
  EXPECT_EQ(LogValue(0.1).json(), "0.1");
  EXPECT_EQ(LogValue(std::numeric_limits<double>::infinity()).json(), "\"inf\"");
  EXPECT_EQ(LogValue(false).json(), "false");
}

}  // namespace
}  // namespace tomo::server
