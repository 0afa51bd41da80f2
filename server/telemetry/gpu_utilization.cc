#include "server/telemetry/gpu_utilization.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

namespace tomo::server {
namespace {

// The few NVML declarations used, as nvml.h (NVML API version 2) defines them; the header
// ships with the driver's development files, which tomod's build does not need.
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of time a kernel was running
  unsigned int memory;  // percent of time device memory was read or written
};
constexpr NvmlReturn kNvmlSuccess = 0;

}  // namespace

struct GpuUtilization::Api {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
};

std::unique_ptr<GpuUtilization> GpuUtilization::Open() {
  auto api = std::make_unique<Api>();
  api->library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) return nullptr;
  auto load = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
        ::dlsym(api->library, name));
    return function != nullptr;
  };
  if (!load(api->init, "nvmlInit_v2") || !load(api->shutdown, "nvmlShutdown") ||
      !load(api->by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") ||
      !load(api->utilization, "nvmlDeviceGetUtilizationRates") ||
      api->init() != kNvmlSuccess) {
    ::dlclose(api->library);
    return nullptr;
  }
  return std::unique_ptr<GpuUtilization>(new GpuUtilization(std::move(api)));
}

GpuUtilization::GpuUtilization(std::unique_ptr<Api> api) : api_(std::move(api)) {}

GpuUtilization::~GpuUtilization() {
  api_->shutdown();
  ::dlclose(api_->library);
}

std::optional<double> GpuUtilization::Utilization(const std::string& pci_bus_id) const {
  if (pci_bus_id.empty()) return std::nullopt;
  NvmlDevice device = nullptr;
  NvmlUtilization rates{};
  if (api_->by_pci_bus_id(pci_bus_id.c_str(), &device) != kNvmlSuccess ||
      api_->utilization(device, &rates) != kNvmlSuccess) {
    return std::nullopt;
  }
  return rates.gpu / 100.0;
}

}  // namespace tomo::server
