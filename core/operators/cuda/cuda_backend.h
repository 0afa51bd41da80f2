// The CUDA backend's entry points, for core/devices/devices.cc. Compiled only when
// TOMO_HAVE_CUDA. Host code (g++); the kernels live in one .cu file per geometry and
// direction and are reached through plain C++ launch functions, so nvcc never sees Abseil.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/devices/devices.h"
#include "core/operators/backend.h"

namespace tomo::core::cuda {

// The CUDA devices present; empty (not an error) when there is no driver or no device.
std::vector<DeviceInfo> ListDevices();
// A backend computing on device `index`. INVALID_ARGUMENT for an index that is not a
// device; INTERNAL when the device cannot be initialised.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(int index);

}  // namespace tomo::core::cuda
