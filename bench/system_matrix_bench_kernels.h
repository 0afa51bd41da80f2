// The two element-wise steps the cuSPARSE reference of system-matrix-bench needs between its
// SpMV calls (the products themselves are cuSPARSE's). Plain launch functions; each returns
// cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tomo::bench {

// z[i] = step[i] * (b[i] - y[i]), i < count.
cudaError_t LaunchScaledResidual(const float* b, const float* y, const float* step, float* z,
                                 int64_t count, cudaStream_t stream);
// x[i] = max(x[i], 0), i < count.
cudaError_t LaunchClampNonnegative(float* x, int64_t count, cudaStream_t stream);

}  // namespace tomo::bench
