// Inside the CUDA backend: what cuda_devices.cc needs from cuda_backend.cc. Not for users
// of the core (they go through core/devices/devices.h or cuda_backend.h).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/operators/backend.h"

namespace tomo::core::cuda {

// A CudaBackend bound to `device`, which the caller has checked is a valid ordinal.
// INTERNAL (or RESOURCE_EXHAUSTED) when the device cannot be initialised.
absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int device);

}  // namespace tomo::core::cuda
