// The devices a process can compute on, and the Backend for each.
//
// ListDevices() returns the CUDA devices when this build has the CUDA backend and a
// device is present (none on a machine without a driver: no error), followed by the CPU.
// MakeBackend() creates a backend bound to one device; the CUDA backend selects its
// device on each call (no process-wide cudaSetDevice left behind for other jobs).
//
//   for (const DeviceInfo& d : ListDevices()) std::cout << d.id << "\n";  // cuda:0, cpu
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(devices[0]));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/operators/backend.h"

namespace tomo::core {

enum class DeviceKind { kCpu, kCuda };

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;             // CUDA ordinal; 0 for the CPU
  std::string id;            // "cuda:0", "cpu"
  std::string name;          // "NVIDIA H100 80GB HBM3", "cpu (16 threads)"
  uint64_t memory_total_bytes = 0;
  uint64_t memory_free_bytes = 0;
  // "00000000:1B:00.0" for a GPU (NVML's form of its PCI address); empty for the CPU.
  std::string pci_bus_id;
};

// True when this binary was built with the CUDA backend.
bool BuiltWithCuda();
std::vector<DeviceInfo> ListDevices();
// The CUDA devices only (empty without CUDA or without a device).
std::vector<DeviceInfo> ListCudaDevices();
DeviceInfo CpuDevice();
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const DeviceInfo& device);

}  // namespace tomo::core
