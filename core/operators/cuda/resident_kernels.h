// Plain launch functions for the kernels of CudaResidentOperators
// (cuda_resident_operators.h): the element-wise operations of resident_operators.h
// (resident_elementwise.cu), the dot product's partial sums (resident_dot.cu) and the
// few-view forward projection (few_view_forward.cu). With vector_kernels.h, the only headers
// those .cu files include (no Abseil, no core header). Pointers are device
// pointers; counts are elements; each function enqueues on `stream` and returns
// cudaGetLastError() taken right after the launch.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {

// few_view_forward.cu: projections = A volume for the views of `views` (device array of
// detector.num_views VectorFpView), each ray split among several threads; the projection
// of LaunchVectorForward's kExact sampler (same samples, partial sums added in a fixed
// order). Detector rows and views at most 65535.
cudaError_t LaunchFewViewForward(const VectorVolumeShape& volume_shape,
                                 const VectorDetectorShape& detector, const VectorFpView* views,
                                 const float* volume, float* projections, cudaStream_t stream);

cudaError_t LaunchFill(float value, int64_t count, float* x, cudaStream_t stream);
// y = a x + b y
cudaError_t LaunchAxpby(float a, const float* x, float b, int64_t count, float* y,
                        cudaStream_t stream);
// y = w y
cudaError_t LaunchMultiply(const float* w, int64_t count, float* y, cudaStream_t stream);
// x = min(max(x + (s > epsilon ? a d / s : 0), lower), upper)
cudaError_t LaunchAddScaledQuotient(float a, const float* d, const float* s, float epsilon,
                                    float lower, float upper, int64_t count, float* x,
                                    cudaStream_t stream);
// x = x > epsilon ? 1 / x : 0
cudaError_t LaunchInvertGuarded(float epsilon, int64_t count, float* x, cudaStream_t stream);
// x = min(max(x, lower), upper)
cudaError_t LaunchClamp(float lower, float upper, int64_t count, float* x, cudaStream_t stream);

// The dot product's blocks: DotBlocks(count) partial sums (float64) of a[i] * b[i], block k
// summing the elements a grid-stride loop gives it; the host adds the partials in order,
// so the result depends only on the count (not on timing). partials holds at least
// kMaxDotBlocks doubles.
constexpr int32_t kMaxDotBlocks = 1024;
int32_t DotBlocks(int64_t count);
cudaError_t LaunchDotPartials(const float* a, const float* b, int64_t count, double* partials,
                              cudaStream_t stream);
// *total += the sum of partials[0 .. count) in order (one thread: deterministic).
cudaError_t LaunchAddPartials(const double* partials, int32_t count, double* total,
                              cudaStream_t stream);

}  // namespace tomo::core::cuda
