#include "core/devices/devices.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::StartsWith;

TEST(DevicesTest, ListEndsWithTheCpu) {
  const std::vector<DeviceInfo> devices = ListDevices();
  ASSERT_FALSE(devices.empty());
  const DeviceInfo& cpu = devices.back();
  EXPECT_EQ(cpu.kind, DeviceKind::kCpu);
  EXPECT_EQ(cpu.id, "cpu");
  EXPECT_THAT(cpu.name, StartsWith("cpu ("));
  EXPECT_GT(cpu.memory_total_bytes, 0u);
  EXPECT_LE(cpu.memory_free_bytes, cpu.memory_total_bytes);
  EXPECT_EQ(devices.size(), ListCudaDevices().size() + 1);
  for (size_t i = 0; i + 1 < devices.size(); ++i) {
    EXPECT_EQ(devices[i].kind, DeviceKind::kCuda);
  }
}

TEST(DevicesTest, MakesTheCpuBackend) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(CpuDevice());
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_NE(*backend, nullptr);
  EXPECT_EQ((*backend)->name(), "cpu");
}

TEST(DevicesTest, CudaWithoutTheCudaBackendIsAFailedPrecondition) {
  if (BuiltWithCuda()) GTEST_SKIP() << "this build has the CUDA backend";
  EXPECT_TRUE(ListCudaDevices().empty());
  DeviceInfo cuda;
  cuda.kind = DeviceKind::kCuda;
  cuda.id = "cuda:0";
  const absl::Status status = MakeBackend(cuda).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("this build has no CUDA backend"));
}

}  // namespace
}  // namespace tomo::core
