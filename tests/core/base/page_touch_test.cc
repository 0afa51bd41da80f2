#include "core/base/page_touch.h"

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::core {
namespace {

TEST(PageTouchTest, TouchesAllBlocksWhileAskedAndWritesOnlyZeros) {
  // 150 MiB + 5 bytes: three blocks, the last partial and not a whole number of pages.
  const size_t bytes = (size_t{150} << 20) + 5;
  std::vector<char> memory(bytes, 7);
  const size_t touched = TouchPagesWhile(memory.data(), bytes, [] { return true; });
  EXPECT_EQ(touched, bytes);
  size_t zeros = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (memory[i] == 0) {
      ++zeros;
      ASSERT_EQ(i % 4096, 0u) << i;  // one byte at the start of each page
    } else {
      ASSERT_EQ(memory[i], 7) << i;
    }
  }
  EXPECT_EQ(zeros, (bytes + 4095) / 4096);
}

TEST(PageTouchTest, StopsWhenToldBetweenBlocks) {
  const size_t bytes = size_t{200} << 20;
  std::vector<char> memory(bytes, 7);
  EXPECT_EQ(TouchPagesWhile(memory.data(), bytes, [] { return false; }), 0u);
  EXPECT_EQ(memory[0], 7);
  int asked = 0;
  const size_t touched = TouchPagesWhile(memory.data(), bytes, [&] { return asked++ < 2; });
  EXPECT_EQ(touched, size_t{128} << 20);  // two blocks of 64 MiB
  EXPECT_EQ(memory[0], 0);
  EXPECT_EQ(memory[(size_t{128} << 20) - 4096], 0);
  EXPECT_EQ(memory[size_t{128} << 20], 7);  // the third block was not touched
}

}  // namespace
}  // namespace tomo::core
