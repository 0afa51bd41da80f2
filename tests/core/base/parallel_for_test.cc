#include "core/base/parallel_for.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::core {
namespace {

TEST(ParallelForTest, DefaultThreadCountIsPositive) { EXPECT_GE(DefaultThreadCount(), 1); }

TEST(ParallelForTest, VisitsEveryIndexExactlyOnceInContiguousChunks) {
  for (int64_t count : {0, 1, 2, 7, 1000}) {
    for (int threads : {0, 1, 2, 3, 8, 2000}) {
      SCOPED_TRACE(testing::Message() << "count " << count << ", threads " << threads);
      std::vector<std::atomic<int>> visits(static_cast<size_t>(count));
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      ParallelFor(
          count,
          [&](int64_t begin, int64_t end) {
            {
              std::lock_guard<std::mutex> lock(mutex);
              chunks.emplace_back(begin, end);
            }
            for (int64_t i = begin; i < end; ++i) ++visits[static_cast<size_t>(i)];
          },
          threads);
      for (int64_t i = 0; i < count; ++i) EXPECT_EQ(visits[static_cast<size_t>(i)], 1) << i;
      for (const auto& [begin, end] : chunks) EXPECT_LT(begin, end);
      if (count == 0) {
        EXPECT_TRUE(chunks.empty());
      }
    }
  }
}

// Below and above the size from which several threads fill and copy (4 Mi values), with a
// partial last block: every element written, nothing beyond the range touched.
TEST(ParallelForTest, FillAndCopyCoverExactlyTheRange) {
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}, (int64_t{5} << 20) + 3}) {
    SCOPED_TRACE(testing::Message() << "count " << count);
    std::vector<float> values(static_cast<size_t>(count + 2), -1.0f);
    ParallelFill(values.data() + 1, count, 2.5f);
    EXPECT_EQ(values.front(), -1.0f);
    EXPECT_EQ(values.back(), -1.0f);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) wrong += values[static_cast<size_t>(i + 1)] != 2.5f;
    EXPECT_EQ(wrong, 0);

    std::vector<float> source(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) source[static_cast<size_t>(i)] = static_cast<float>(i);
    std::vector<float> copy(static_cast<size_t>(count + 2), -1.0f);
    ParallelCopy(source.data(), count, copy.data() + 1);
    EXPECT_EQ(copy.front(), -1.0f);
    EXPECT_EQ(copy.back(), -1.0f);
    wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      wrong += copy[static_cast<size_t>(i + 1)] != static_cast<float>(i);
    }
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
}  // namespace tomo::core
