#include "server/telemetry/log_rate_limit.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

// A burst of refusals on a clock the test moves: max_lines per window are written, the
// rest counted, and the first line of a later window carries exactly the count left out.
// Random burst sizes and gaps; the oracle is simple arithmetic on the window.
TEST(LogRateLimitTest, AtMostMaxLinesPerIntervalAndTheNextLineCountsTheRest) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  absl::Time now = absl::FromUnixSeconds(1700000000);
  const int max_lines = 3 + static_cast<int>(rng() % 5);
  const absl::Duration interval = absl::Milliseconds(700 + rng() % 900);
  LogRateLimit limit(max_lines, interval, [&now] { return now; });

  uint64_t expected_suppressed = 0;
  for (int window = 0; window < 6; ++window) {
    const int calls = static_cast<int>(rng() % 40);
    int written = 0;
    for (int i = 0; i < calls; ++i) {
      uint64_t suppressed = 12345;
      const bool admitted = limit.Admit(&suppressed);
      EXPECT_EQ(admitted, i < max_lines) << "window " << window << ", call " << i;
      if (admitted) {
        ++written;
        // The first line of a window reports what the last window left out, then 0.
        EXPECT_EQ(suppressed, i == 0 ? expected_suppressed : 0u) << "window " << window;
        expected_suppressed = 0;
      } else {
        ++expected_suppressed;
      }
      now += interval / (4 * max_lines + 40);  // all calls of the window fall inside it
    }
    EXPECT_LE(written, max_lines);
    now += interval;  // the next window
  }
}

TEST(LogRateLimitTest, ANewWindowStartsOnlyAfterTheInterval) {
  absl::Time now = absl::FromUnixSeconds(1700000000);
  LogRateLimit limit(2, absl::Seconds(10), [&now] { return now; });
  uint64_t suppressed = 0;
  EXPECT_TRUE(limit.Admit(&suppressed));
  EXPECT_TRUE(limit.Admit(&suppressed));
  EXPECT_FALSE(limit.Admit(&suppressed));
  now += absl::Seconds(9.9);
  EXPECT_FALSE(limit.Admit(&suppressed));
  now += absl::Seconds(0.1);
  EXPECT_TRUE(limit.Admit(&suppressed));
  EXPECT_EQ(suppressed, 2u);
}

}  // namespace
}  // namespace tomo::server
