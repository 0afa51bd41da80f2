// The CUDA devices of this process and the CudaBackend factory (see cuda_backend.h).
//
// ListDevices() never fails: on a machine without a driver or without a device (CI),
// cudaGetDeviceCount reports an error and the list is empty. Asking for a device's free
// memory initialises its context (once per process and device).

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/operators/cuda/cuda_backend.h"
#include "core/operators/cuda/cuda_backend_internal.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_memory_pool.h"

namespace tomo::core::cuda {
namespace {

// The number of CUDA devices; 0 on any error (no driver, no device, driver too old).
int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next caller
    return 0;
  }
  return count;
}

}  // namespace

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> devices;
  const int count = DeviceCount();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    DeviceInfo info;
    info.kind = DeviceKind::kCuda;
    info.index = i;
    info.id = absl::StrCat("cuda:", i);
    info.name = properties.name;
    info.memory_total_bytes = properties.totalGlobalMem;
    // The PCI address names the same GPU for NVML (utilisation), whatever the CUDA order.
    info.pci_bus_id = absl::StrFormat("%08X:%02X:%02X.0", properties.pciDomainID,
                                      properties.pciBusID, properties.pciDeviceID);
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(i);
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (scope.ok() && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.memory_total_bytes = total_bytes;
      // With what the memory pool holds unused (cuda_memory_pool.h).
      const absl::StatusOr<uint64_t> free_with_pool = FreeDeviceBytes();
      info.memory_free_bytes = free_with_pool.ok() ? *free_with_pool : free_bytes;
    } else {
      cudaGetLastError();
    }
    devices.push_back(std::move(info));
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(int index) {
  const int count = DeviceCount();
  if (index < 0 || index >= count) {
    if (count == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda device index ", index, " is not a device: no CUDA device present"));
    }
    return absl::InvalidArgumentError(absl::StrCat("cuda device index ", index,
                                                   " is not a device; allowed range [0, ",
                                                   count - 1, "]"));
  }
  return NewCudaBackend(index);
}

}  // namespace tomo::core::cuda
