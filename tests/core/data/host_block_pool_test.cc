// HostBlockPool: freed large blocks kept mapped for the next array of their size, the bound
// on what is kept (longest kept freed first), attachments destroyed exactly when the memory
// is freed, and arrays from several threads never sharing a block.

#include "core/data/host_block_pool.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/data/array3d.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Sets the pool's bound for one test, empties it, and puts the bound back afterwards.
class HostBlockPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_limit_ = pool_.kept_bytes_limit();
    pool_.SetKeptBytesLimit(size_t{1} << 30);
    pool_.Clear();
  }
  void TearDown() override {
    pool_.Clear();
    pool_.SetKeptBytesLimit(saved_limit_);
  }
  // A random size of at least the pool's threshold, not a whole number of huge pages.
  size_t RandomLargeBytes() {
    return kLargeBlockBytes + static_cast<size_t>(random_() % (24 * kMiB)) + 1;
  }
  // Something to attach whose end is seen.
  std::shared_ptr<void> Flag(std::atomic<int>& destroyed) {
    return std::shared_ptr<void>(new int(0), [&destroyed](void* p) {
      delete static_cast<int*>(p);
      ++destroyed;
    });
  }

  HostBlockPool& pool_ = HostBlockPool::Get();
  size_t saved_limit_ = 0;
  const uint64_t seed_ = testing::TestSeed();
  std::mt19937_64 random_{seed_};
};

TEST_F(HostBlockPoolTest, AFreedBlockComesBackMappedForTheSameSize) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const size_t bytes = RandomLargeBytes();
  auto* first = static_cast<unsigned char*>(pool_.Take(bytes));
  std::memset(first, 0xA5, bytes);
  std::optional<HostBlock> block = pool_.FindInUse(first + bytes - 1);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->start, first);
  EXPECT_EQ(block->uses, 1);
  EXPECT_GE(block->bytes, bytes);
  EXPECT_EQ(block->bytes % (2 * kMiB), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (2 * kMiB), 0u);
  const size_t rounded = block->bytes;

  pool_.GiveBack(first, bytes);
  EXPECT_EQ(pool_.kept_bytes(), rounded);
  EXPECT_FALSE(pool_.FindInUse(first).has_value());  // kept, not in use

  // Any request that rounds to the same size gets it, with what the last array left.
  auto* again = static_cast<unsigned char*>(pool_.Take(rounded - 1));
  EXPECT_EQ(again, first);
  EXPECT_EQ(again[0], 0xA5);
  EXPECT_EQ(again[bytes - 1], 0xA5);
  EXPECT_EQ(pool_.kept_bytes(), 0u);
  block = pool_.FindInUse(again);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->uses, 2);

  // Another size does not.
  void* other = pool_.Take(rounded + 2 * kMiB);
  EXPECT_NE(other, again);
  pool_.GiveBack(other, rounded + 2 * kMiB);
  pool_.GiveBack(again, bytes);
}

TEST_F(HostBlockPoolTest, PastTheBoundTheLongestKeptIsFreedWithItsAttachment) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const size_t bytes = RandomLargeBytes();
  void* a = pool_.Take(bytes);
  void* b = pool_.Take(bytes);
  void* c = pool_.Take(bytes);
  const size_t rounded = pool_.FindInUse(a)->bytes;
  pool_.SetKeptBytesLimit(2 * rounded);  // room for two
  std::atomic<int> a_gone{0}, b_gone{0};
  ASSERT_TRUE(pool_.Attach(a, Flag(a_gone)));
  ASSERT_TRUE(pool_.Attach(b, Flag(b_gone)));
  EXPECT_TRUE(pool_.FindInUse(a)->attached);

  pool_.GiveBack(a, bytes);
  pool_.GiveBack(b, bytes);
  EXPECT_EQ(a_gone.load(), 0);  // kept: their attachments live on
  EXPECT_EQ(pool_.kept_bytes(), 2 * rounded);
  pool_.GiveBack(c, bytes);  // a, kept longest, makes room
  EXPECT_EQ(a_gone.load(), 1);
  EXPECT_EQ(b_gone.load(), 0);
  EXPECT_EQ(pool_.kept_bytes(), 2 * rounded);

  // The attached block is handed out first, and keeps its attachment.
  void* next = pool_.Take(bytes);
  EXPECT_EQ(next, b);
  EXPECT_TRUE(pool_.FindInUse(next)->attached);
  pool_.GiveBack(next, bytes);

  // Lowering the bound frees at once; a block above the bound is freed when given back.
  pool_.SetKeptBytesLimit(0);
  EXPECT_EQ(b_gone.load(), 1);
  EXPECT_EQ(pool_.kept_bytes(), 0u);
  void* d = pool_.Take(bytes);
  std::atomic<int> d_gone{0};
  ASSERT_TRUE(pool_.Attach(d, Flag(d_gone)));
  pool_.GiveBack(d, bytes);
  EXPECT_EQ(d_gone.load(), 1);
  EXPECT_EQ(pool_.kept_bytes(), 0u);
}

TEST_F(HostBlockPoolTest, AttachRefusesAKeptBlockAnUnknownOneAndASecondAttachment) {
  const size_t bytes = RandomLargeBytes();
  void* block = pool_.Take(bytes);
  std::atomic<int> first_gone{0}, second_gone{0}, stray_gone{0};
  EXPECT_TRUE(pool_.Attach(block, Flag(first_gone)));
  EXPECT_FALSE(pool_.Attach(block, Flag(second_gone)));
  EXPECT_EQ(second_gone.load(), 1);  // dropped at once
  int stack_value = 0;
  EXPECT_FALSE(pool_.Attach(&stack_value, Flag(stray_gone)));
  EXPECT_FALSE(pool_.FindInUse(&stack_value).has_value());
  pool_.GiveBack(block, bytes);
  EXPECT_FALSE(pool_.Attach(block, Flag(stray_gone)));  // kept, not in use
  EXPECT_EQ(first_gone.load(), 0);
  pool_.Clear();
  EXPECT_EQ(first_gone.load(), 1);
  EXPECT_EQ(stray_gone.load(), 2);
}

TEST_F(HostBlockPoolTest, ARequestTheSystemRefusesFreesTheKeptBlocksFirst) {
  const size_t bytes = RandomLargeBytes();
  void* block = pool_.Take(bytes);
  std::atomic<int> gone{0};
  ASSERT_TRUE(pool_.Attach(block, Flag(gone)));
  pool_.GiveBack(block, bytes);
  ASSERT_GT(pool_.kept_bytes(), 0u);
  // Far more than any machine has (2^60 bytes): refused even after the pool gives back.
  EXPECT_THROW(pool_.Take(size_t{1} << 60), std::bad_alloc);
  EXPECT_EQ(pool_.kept_bytes(), 0u);
  EXPECT_EQ(gone.load(), 1);
}

TEST_F(HostBlockPoolTest, LargeArraysReuseTheBlockOfAFreedOneOfTheirSize) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{static_cast<int64_t>(28 + random_() % 20), 301, 1031};  // >= 32 MiB
  ASSERT_GE(static_cast<size_t>(dims.count()) * sizeof(float), kLargeBlockBytes);
  const float* freed = nullptr;
  {
    Array3D array(dims, 2.5f);
    freed = array.data();
  }
  Array3D again = Array3D::Uninitialized(dims);
  EXPECT_EQ(again.data(), freed);
  Array3D filled(dims, -1.0f);  // the pool is empty now: new memory, filled
  EXPECT_NE(filled.data(), freed);
  EXPECT_EQ(filled.at(dims.d0 - 1, 300, 1030), -1.0f);
  // Small arrays stay outside the pool.
  Array3D small({2, 3, 4});
  EXPECT_FALSE(pool_.FindInUse(small.data()).has_value());
}

TEST_F(HostBlockPoolTest, ThreadsNeverHoldOneBlockAtOnce) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  pool_.SetKeptBytesLimit(6 * kLargeBlockBytes);
  constexpr int kThreads = 4;
  std::atomic<bool> shared{false};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<void*> held;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(seed_ + static_cast<uint64_t>(t));
      for (int i = 0; i < 200; ++i) {
        const size_t bytes = kLargeBlockBytes + (random() % 3) * 2 * kMiB;
        void* block = pool_.Take(bytes);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!held.insert(block).second) shared = true;
        }
        static_cast<char*>(block)[random() % bytes] = 1;
        std::lock_guard<std::mutex> lock(mu);
        held.erase(block);
        pool_.GiveBack(block, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(shared.load());
  EXPECT_LE(pool_.kept_bytes(), 6 * kLargeBlockBytes);
}

}  // namespace
}  // namespace tomo::core
