#include "core/devices/devices.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/operators/cpu/cpu_backend.h"

#ifdef TOMO_HAVE_CUDA
#include "core/operators/cuda/cuda_backend.h"
#endif

namespace tomo::core {
namespace {

// MemTotal and MemAvailable from /proc/meminfo (kB), which count the page cache that the
// kernel would give back; sysconf's free pages do not, so they are only the fallback.
bool ReadMeminfo(uint64_t& total_bytes, uint64_t& available_bytes) {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) return false;
  bool have_total = false, have_available = false;
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") {
      total_bytes = kib * 1024;
      have_total = true;
    } else if (key == "MemAvailable:") {
      available_bytes = kib * 1024;
      have_available = true;
    }
  }
  return have_total && have_available;
}

}  // namespace

bool BuiltWithCuda() {
#ifdef TOMO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<DeviceInfo> ListCudaDevices() {
#ifdef TOMO_HAVE_CUDA
  return cuda::ListDevices();
#else
  return {};
#endif
}

DeviceInfo CpuDevice() {
  DeviceInfo device;
  device.kind = DeviceKind::kCpu;
  device.index = 0;
  device.id = "cpu";
  device.name = absl::StrCat("cpu (", DefaultThreadCount(), " threads)");
  uint64_t total = 0, available = 0;
  if (!ReadMeminfo(total, available)) {
    const long page_size = sysconf(_SC_PAGESIZE);
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long free_pages = sysconf(_SC_AVPHYS_PAGES);
    if (page_size > 0 && pages > 0) total = static_cast<uint64_t>(pages) * page_size;
    if (page_size > 0 && free_pages > 0) available = static_cast<uint64_t>(free_pages) * page_size;
  }
  device.memory_total_bytes = total;
  device.memory_free_bytes = available;
  return device;
}

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> devices = ListCudaDevices();
  devices.push_back(CpuDevice());
  return devices;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const DeviceInfo& device) {
  switch (device.kind) {
    case DeviceKind::kCpu:
      return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
    case DeviceKind::kCuda:
#ifdef TOMO_HAVE_CUDA
      return cuda::MakeBackend(device.index);
#else
      return absl::FailedPreconditionError(
          absl::StrCat("device ", device.id, ": this build has no CUDA backend"));
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device ", device.id, ": unknown device kind ", static_cast<int>(device.kind)));
}

}  // namespace tomo::core
