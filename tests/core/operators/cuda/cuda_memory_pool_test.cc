// Tests of the kept device memory pool (core/operators/cuda/cuda_memory_pool.h) on the first
// CUDA device: memory freed into the pool stays mapped and still counts as free; an
// allocation outside the pool (a texture array, any cudaMalloc) gets the pool's unused
// memory when the driver has too little left. Every test skips without a CUDA device
// (CI); they run on a machine with an NVIDIA GPU (the last needs none). Sizes are measured with cudaMemGetInfo, so
// the device must not be shared with other work while they run.

#include "core/operators/cuda/cuda_memory_pool.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/status/status.h"
#include "core/devices/devices.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "gtest/gtest.h"

namespace tomo::core::cuda {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// What the driver's own bookkeeping may move between two readings of the free memory.
constexpr uint64_t kSlack = 64 * kMiB;

uint64_t DriverFreeBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  return free_bytes;
}

uint64_t PoolReservedBytes() {
  cudaMemPool_t pool = nullptr;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t reserved = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
            cudaSuccess);
  return reserved;
}

int64_t Difference(uint64_t a, uint64_t b) {
  return static_cast<int64_t>(a) - static_cast<int64_t>(b);
}

class CudaMemoryPoolTest : public testing::Test {
 protected:
  void SetUp() override {
    if (ListCudaDevices().empty()) GTEST_SKIP() << "no CUDA device";
    auto scope = ScopedDevice::Enter(0);
    ASSERT_TRUE(scope.ok()) << scope.status();
    scope_.emplace(std::move(*scope));
    ASSERT_TRUE(KeepFreedDeviceMemory(0).ok());
    ASSERT_TRUE(TrimDeviceMemoryPool().ok());  // start from an empty pool
    auto stream = Stream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_.emplace(std::move(*stream));
  }
  void TearDown() override {
    stream_.reset();
    if (scope_) EXPECT_TRUE(TrimDeviceMemoryPool().ok());
  }

  // Allocates `bytes` from the pool and frees them again, in stream order, and waits.
  void AllocateAndFree(uint64_t bytes) {
    auto buffer = DeviceBuffer<char>::Allocate(static_cast<size_t>(bytes), stream_->get());
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer->Reset();
    ASSERT_EQ(cudaStreamSynchronize(stream_->get()), cudaSuccess);
  }

  std::optional<ScopedDevice> scope_;
  std::optional<Stream> stream_;
};

TEST_F(CudaMemoryPoolTest, FreedMemoryStaysMappedAndCountsAsFree) {
  const uint64_t driver_before = DriverFreeBytes();
  const absl::StatusOr<uint64_t> free_before = FreeDeviceBytes();
  ASSERT_TRUE(free_before.ok()) << free_before.status();
  // The pool held nothing: both readings agree.
  EXPECT_LE(std::abs(Difference(*free_before, driver_before)), static_cast<int64_t>(kSlack));

  const uint64_t bytes = 1536 * kMiB;
  AllocateAndFree(bytes);
  const uint64_t driver_after = DriverFreeBytes();
  const absl::StatusOr<uint64_t> free_after = FreeDeviceBytes();
  ASSERT_TRUE(free_after.ok()) << free_after.status();
  std::printf("[ measure ] driver free %.1f -> %.1f MiB, with the pool %.1f -> %.1f MiB\n",
              driver_before / double(kMiB), driver_after / double(kMiB),
              *free_before / double(kMiB), *free_after / double(kMiB));
  // Kept by the pool: the driver's free memory is lower by about the allocation ...
  EXPECT_GE(Difference(driver_before, driver_after), static_cast<int64_t>(bytes - kSlack));
  EXPECT_GE(PoolReservedBytes(), bytes);
  // ... and yet it counts as free.
  EXPECT_LE(std::abs(Difference(*free_after, *free_before)), static_cast<int64_t>(kSlack));

  // A second allocation of the same size comes from the pool: the driver maps nothing new.
  AllocateAndFree(bytes);
  EXPECT_LE(std::abs(Difference(DriverFreeBytes(), driver_after)), static_cast<int64_t>(kSlack));

  // Trimmed, the memory goes back to the driver.
  ASSERT_TRUE(TrimDeviceMemoryPool().ok());
  EXPECT_LE(std::abs(Difference(DriverFreeBytes(), driver_before)), static_cast<int64_t>(kSlack));
  EXPECT_LT(PoolReservedBytes(), kSlack);
}

TEST_F(CudaMemoryPoolTest, AllocationsOutsideThePoolGetItsUnusedMemory) {
  // The pool keeps all but ~1 GiB of the device's free memory, unused.
  const uint64_t driver_free = DriverFreeBytes();
  const uint64_t left = 1024 * kMiB;
  ASSERT_GT(driver_free, 8 * left);
  AllocateAndFree(driver_free - left);
  ASSERT_LE(DriverFreeBytes(), left + kSlack);

  // A texture array of 2 GiB does not fit in what the driver has left; it is made after the
  // pool hands its unused memory back.
  absl::StatusOr<TextureArray> texture =
      TextureArray::Create(/*width=*/1024, /*height=*/1024, /*depth=*/512, /*layered=*/true);
  ASSERT_TRUE(texture.ok()) << texture.status();
  EXPECT_LT(PoolReservedBytes(), driver_free / 2);

  // A plain cudaMalloc, after the pool took the memory again, also succeeds (the driver
  // itself hands pool memory back when a cudaMalloc would fail: measured on an H200).
  *texture = TextureArray();
  AllocateAndFree(DriverFreeBytes() - left);
  ASSERT_LE(DriverFreeBytes(), left + kSlack);
  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, 2048 * kMiB), cudaSuccess);
  EXPECT_EQ(cudaFree(memory), cudaSuccess);
}

TEST_F(CudaMemoryPoolTest, ExhaustionTrimsThePoolAndTriesOnceMore) {
  AllocateAndFree(1536 * kMiB);
  ASSERT_GE(PoolReservedBytes(), 1536 * kMiB);
  int tries = 0;
  uint64_t reserved_at_second_try = 0;
  const absl::Status status = WithPoolTrimmedOnExhaustion([&]() -> absl::Status {
    if (++tries == 1) return absl::ResourceExhaustedError("out of memory");
    reserved_at_second_try = PoolReservedBytes();
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(tries, 2);
  EXPECT_LT(reserved_at_second_try, kSlack);  // the pool's unused memory was handed back

  // Exhausted twice: the second error is the answer, no third try.
  tries = 0;
  const absl::Status twice = WithPoolTrimmedOnExhaustion([&] {
    ++tries;
    return absl::ResourceExhaustedError("out of memory");
  });
  EXPECT_EQ(twice.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tries, 2);
}

// No device needed: an error other than exhaustion comes back as it is, untried again.
TEST(WithPoolTrimmedOnExhaustionTest, OtherErrorsAreNotRetried) {
  int tries = 0;
  const absl::Status status = WithPoolTrimmedOnExhaustion([&] {
    ++tries;
    return absl::InvalidArgumentError("not about memory");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tries, 1);
}

}  // namespace
}  // namespace tomo::core::cuda
