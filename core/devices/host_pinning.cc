#include "core/devices/host_pinning.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

#ifdef TOMO_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/operators/cuda/cuda_check.h"
#endif

namespace tomo::core {
namespace {

class UnpinnedRegion final : public PinnedHostRegion {
 public:
  UnpinnedRegion(const void* data, size_t bytes, std::string why_not)
      : PinnedHostRegion(data, bytes, /*pinned=*/false, std::move(why_not)) {}
};

#ifdef TOMO_HAVE_CUDA
// Registered with cudaHostRegister; unregistered when destroyed.
class CudaRegisteredRegion final : public PinnedHostRegion {
 public:
  CudaRegisteredRegion(const void* data, size_t bytes)
      : PinnedHostRegion(data, bytes, /*pinned=*/true, "") {}
  ~CudaRegisteredRegion() override {
    // Not tied to a device (portable): no device needs to be current.
    if (cudaHostUnregister(const_cast<void*>(data())) != cudaSuccess) cudaGetLastError();
  }
};
#endif

}  // namespace

std::unique_ptr<PinnedHostRegion> PinnedHostRegion::Unpinned(const void* data, size_t bytes,
                                                             std::string why_not) {
  return std::make_unique<UnpinnedRegion>(data, bytes, std::move(why_not));
}

absl::StatusOr<std::unique_ptr<PinnedHostRegion>> PinHostMemory(const void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return PinnedHostRegion::Unpinned(data, bytes, "no bytes");
#ifdef TOMO_HAVE_CUDA
  // No driver or no device (CI, a CPU-only machine): nothing to pin for, not an error.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // leave no error behind for the next caller
    return PinnedHostRegion::Unpinned(data, bytes, "no CUDA device");
  }
  int device = 0;
  TOMO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int supported = 0;
  TOMO_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterSupported, device));
  if (supported == 0) {
    return PinnedHostRegion::Unpinned(
        data, bytes, absl::StrCat("cuda:", device, " does not support cudaHostRegister"));
  }
  const cudaError_t error =
      cudaHostRegister(const_cast<void*>(data), bytes, cudaHostRegisterPortable);
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave it to nobody
    return cuda::CudaCallStatus(error, "cudaHostRegister(data, bytes, cudaHostRegisterPortable)",
                                __FILE__, __LINE__);
  }
  return std::unique_ptr<PinnedHostRegion>(std::make_unique<CudaRegisteredRegion>(data, bytes));
#else
  return PinnedHostRegion::Unpinned(data, bytes, "this build has no CUDA backend");
#endif
}

}  // namespace tomo::core
