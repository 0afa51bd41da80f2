// CudaResidentOperators: ResidentOperators (core/operators/resident_operators.h) on one
// CUDA device. Host code (g++); CudaBackend::MakeResidentOperators makes it.
//
// Arrays are stream-ordered device buffers (DeviceBuffer, cudaMallocAsync on the backend's
// stream); every operation is enqueued on that stream and returns without waiting, except
// Download and Dot, which synchronise it. Element-wise kernels in resident_elementwise.cu,
// the dot product's partials in resident_dot.cu (summed on the host in block order:
// deterministic). The device is made current (ScopedDevice) for every call.
//
// Projectors: one DeviceVectorProjector per MakeProjector (per-view parameters uploaded
// once) with the sampler chosen by its views (bench/NOTES.md, iterative section):
//  - back projection: the layered-texture sampler (float32 texels, kNone), or the staged
//    exact one-row kernel for 2D geometries (DeviceVectorProjector's defaults);
//  - forward projection: the layered-texture sampler (three layered arrays of the volume and
//    two transpose scratch volumes, kept by the projector) for the first projector of at
//    least kMinViewsForTextureForward views; the 3D texture (one array of the volume) for
//    later ones of that many views; for projectors of fewer views (SART: one view per
//    block) the split-ray kernel of few_view_forward.cu (plain float loads, no copy of the
//    volume: the copy into a texture would cost more than the projection).
//
//   TOMO_ASSIGN_OR_RETURN(auto ops, MakeCudaResidentOperators(0, stream, "cuda:0"));
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/operators/resident_operators.h"

namespace tomo::core::cuda {

constexpr int64_t kMinViewsForTextureForward = 16;

// device: the ordinal (the caller checked it); stream: the backend's, which must outlive the
// result; name: the backend's name.
absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeCudaResidentOperators(
    int device, cudaStream_t stream, std::string name);

}  // namespace tomo::core::cuda
