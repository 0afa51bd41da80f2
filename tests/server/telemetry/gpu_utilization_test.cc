#include "server/telemetry/gpu_utilization.h"

#include "core/devices/devices.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

// On the GPU machine: NVML loads and reports each CUDA device, by the PCI address the
// core lists, as a fraction in [0, 1]. Without a GPU there is nothing to ask NVML about.
TEST(GpuUtilizationTest, ReportsEveryCudaDeviceAsAFraction) {
  const std::vector<core::DeviceInfo> gpus = core::ListCudaDevices();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<GpuUtilization> nvml = GpuUtilization::Open();
  ASSERT_NE(nvml, nullptr) << "libnvidia-ml.so.1 did not load beside a working CUDA driver";
  for (const core::DeviceInfo& gpu : gpus) {
    ASSERT_FALSE(gpu.pci_bus_id.empty()) << gpu.id;
    std::optional<double> busy = nvml->Utilization(gpu.pci_bus_id);
    ASSERT_TRUE(busy.has_value()) << gpu.id << " at " << gpu.pci_bus_id;
    EXPECT_GE(*busy, 0.0);
    EXPECT_LE(*busy, 1.0);
  }
}

TEST(GpuUtilizationTest, UnknownAddressIsNotReported) {
  std::unique_ptr<GpuUtilization> nvml = GpuUtilization::Open();
  if (nvml == nullptr) GTEST_SKIP() << "no NVML on this machine";
  EXPECT_FALSE(nvml->Utilization("").has_value());
  EXPECT_FALSE(nvml->Utilization("0000FFFF:FF:1F.0").has_value());
}

}  // namespace
}  // namespace tomo::server
