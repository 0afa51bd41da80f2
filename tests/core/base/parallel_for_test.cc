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

}  // namespace
}  // namespace tomo::core
