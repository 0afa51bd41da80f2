// How busy each GPU is, from NVML (the NVIDIA driver's management library), for tomod's
// tomod_device_utilization_ratio metric. NVML comes with the driver, not the toolkit, so it
// is loaded at run time (dlopen of libnvidia-ml.so.1): tomod starts and serves on machines
// without a driver, and this sampler then reports nothing.
//
//   std::unique_ptr<GpuUtilization> gpus = GpuUtilization::Open();   // null: no NVML
//   std::optional<double> busy = gpus ? gpus->Utilization(device.pci_bus_id) : std::nullopt;
//
// Thread-safe after Open (NVML's calls are).
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace tomo::server {

class GpuUtilization {
 public:
  // Null when NVML cannot be loaded or initialised.
  static std::unique_ptr<GpuUtilization> Open();
  ~GpuUtilization();
  GpuUtilization(const GpuUtilization&) = delete;
  GpuUtilization& operator=(const GpuUtilization&) = delete;

  // The fraction of the last sample period (1/6 s to 1 s, by GPU) in which a kernel ran on
  // the GPU at that PCI address, in [0, 1]; nullopt when NVML does not know it.
  std::optional<double> Utilization(const std::string& pci_bus_id) const;

 private:
  struct Api;
  explicit GpuUtilization(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace tomo::server
