// Inside the CUDA backend (host code, g++ only): the Projector (core/operators/projector.h)
// that CudaBackend::MakeProjector returns, on host arrays. Each call locks the backend
// (CudaContext::mutex: one call at a time, as the Backend contract says), makes its device
// current, uploads, projects with the kernels of vector_kernels.h, parallel_2d_kernels.h
// and radon_kernels.h, downloads and synchronises.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/cuda/parallel_2d_kernels.h"
#include "core/operators/projector.h"
#include "core/operators/projector_plan.h"

namespace tomo::core::cuda {

// The backend's device, stream and lock, for the objects it makes.
struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  std::mutex* mutex = nullptr;
};

std::unique_ptr<Projector> MakeCudaHostProjector(const CudaContext& context,
                                                 ProjectorModel model, ProjectorPlan plan,
                                                 const VolumeGeometry& volume);

// The exact-transpose 2D parallel projector's per-view parameters (parallel_2d_kernels.h),
// as the backend uploads them; for the benchmark.
std::vector<JosephView> MakeDeviceJosephViews(const ParallelGeometry2D& geometry,
                                              const VolumeGeometry& volume_geometry);

}  // namespace tomo::core::cuda
