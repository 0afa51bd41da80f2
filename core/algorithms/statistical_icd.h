// The "icd" registry entry: PWLS with the q-GGMRF prior by iterative coordinate descent
// with the multi-voxel update (core/statistical/icd.h, docs/statistical.md) on a
// flat-detector cone beam (circular or helical), on the backend's device (the CPU
// reference, or the CUDA runner on a "cuda:N" backend).
//
// A run: the weights w = I0 exp(-y) (IcdAlgorithmOptions), the start (FDK of the same data
// by default, negative values clamped to 0), then ReconstructIcd: one progress event per
// iteration with the relative residual and the cost, cancellation between groups.
// Memory: MinimumDeviceBytes is IcdDeviceBytes with one step per (x, y) column (the least
// any grouping needs), so that tomod refuses a job no device can hold when it is
// submitted; on the CPU a run whose IcdHostBytes exceed context.memory_budget_bytes (when
// set) is RESOURCE_EXHAUSTED before anything is allocated; the CUDA runner checks its own.
//
// Errors: INVALID_ARGUMENT for a geometry the separable-footprint projector does not take
// (naming "icd" and the kind for a Radon geometry), bad options (ValidateIcdOptions), or
// weights that are not finite and >= 0; FDK's errors for the start (a helical orbit needs
// start_from_fdk false); RESOURCE_EXHAUSTED; CANCELLED.
//
// One device: given several backends (Algorithm::RunOnBackends) it runs on the first. Why:
// coordinate descent updates voxel groups one after another against one shared error
// sinogram, so splitting it among devices would need that sinogram exchanged after every
// group, not once per iteration as the views-split methods of iterative_algorithms.h do.
#pragma once

#include <memory>

#include "core/algorithms/reconstruction.h"

namespace tomo::core {

std::unique_ptr<Algorithm> MakeStatisticalIcdAlgorithm();

}  // namespace tomo::core
