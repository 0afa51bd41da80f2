#include "core/base/streaming_copy.h"

#include <cstdint>
#include <random>
#include <vector>

#include "core/base/parallel_for.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr float kPoison = -3.25f;

// Copies `count` random values to every destination offset within a 64-byte line (the
// streaming stores need 16-byte alignment: the head before it is copied plainly) and checks
// every value and that nothing around the destination was written.
TEST(StreamingCopyTest, CopiesEveryValueAtEveryAlignmentAndNothingElse) {
  std::mt19937_64 random(testing::TestSeed());
  SCOPED_TRACE(testing::SeedTrace(testing::TestSeed()));
  std::uniform_real_distribution<float> uniform(-1e3f, 1e3f);
  for (int64_t count : {0, 1, 3, 4, 5, 15, 16, 17, 31, 64, 1000, 4099}) {
    std::vector<float> source(static_cast<size_t>(count) + 16);
    for (float& v : source) v = uniform(random);
    for (int source_offset : {0, 1, 3}) {
      for (int offset = 0; offset < 16; ++offset) {
        SCOPED_TRACE(::testing::Message() << "count " << count << ", offsets " << source_offset
                                        << " / " << offset);
        std::vector<float> target(static_cast<size_t>(count) + 40, kPoison);
        CopyStreaming(source.data() + source_offset, count, target.data() + 8 + offset);
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(target[static_cast<size_t>(8 + offset + i)],
                    source[static_cast<size_t>(source_offset + i)])
              << i;
        }
        for (int i = 0; i < 8 + offset; ++i) ASSERT_EQ(target[static_cast<size_t>(i)], kPoison);
        for (size_t i = static_cast<size_t>(8 + offset + count); i < target.size(); ++i) {
          ASSERT_EQ(target[i], kPoison) << i;
        }
      }
    }
  }
}

// ParallelCopy streams large copies (over 4 Mi values, in blocks on several threads).
TEST(StreamingCopyTest, LargeParallelCopiesAreExact) {
  std::mt19937_64 random(testing::TestSeed());
  SCOPED_TRACE(testing::SeedTrace(testing::TestSeed()));
  const int64_t count = (int64_t{1} << 23) + 7;
  std::vector<float> source(static_cast<size_t>(count));
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (float& v : source) v = uniform(random);
  std::vector<float> target(static_cast<size_t>(count) + 2, kPoison);
  ParallelCopy(source.data(), count, target.data() + 1);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(target[static_cast<size_t>(i + 1)], source[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(target.front(), kPoison);
  EXPECT_EQ(target.back(), kPoison);
}

}  // namespace
}  // namespace tomo::core
