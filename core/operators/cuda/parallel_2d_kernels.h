// Plain launch functions for the CUDA kernels of the 2D parallel-beam operators and the
// row filter: the only header the .cu files include (no Abseil, no core header), so nvcc
// never sees Abseil. The host side (cuda_backend.cc) computes the parameters, owns every
// buffer and turns the returned cudaError_t into absl::Status.
//
// Each Launch... function enqueues its kernel(s) on `stream` and returns
// cudaGetLastError() taken right after the launch (launch-configuration errors); errors
// of the kernel itself surface at the next synchronisation. Pointers are device pointers.
//
//   JosephView* views = ...;  // one per view, from the host (double -> float as below)
//   cudaError_t e = LaunchParallel2dForward(shape, views, d_volume, d_volume_t, d_proj,
//                                           stream);
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tomo::core::cuda {

// Joseph's projector for one view, reduced to index arithmetic (see backend.h for the
// operator). For view v the ray through detector k is stepped over the `step` axis
// (x, i.e. volume columns, when step_along_x, else y, i.e. rows); at step j it crosses the
// `across` axis at the fractional pixel index
//   a(k, j) = across0 + k * across_per_detector + j * across_per_step
// and the ray's contribution there is linear interpolation between pixels floor(a) and
// floor(a) + 1 (pixels outside [0, n_across) count as zero), times step_weight (the path
// length per step, pixel size / |ray direction component|).
// Computed on the host in double, once per call, by the same decision as the CPU
// reference; the float members are what the inner loops use.
// Plain old data (no member initialisers, so that kernels may stage it in shared memory):
// value-initialise it on the host, JosephView view{}.
struct JosephView {
  double across0;                // a(0, 0)
  double across_per_step;        // d a / d j
  double across_per_detector;    // d a / d k, never 0
  float across_per_step_f;       // the same, rounded, for the inner loops
  float across_per_detector_f;
  float detector_per_across_f;   // 1 / across_per_detector
  float step_weight;             // mm of ray per step
  int32_t step_along_x;          // 1: step over columns (x), interpolate across rows (y)
  int32_t unused;                // keeps the size a multiple of 8 on host and device
};
static_assert(sizeof(JosephView) == 48, "JosephView must have one layout for g++ and nvcc");

struct Parallel2dShape {
  int32_t nx = 0;         // volume columns (fastest)
  int32_t ny = 0;         // volume rows
  int32_t num_views = 0;
  int32_t num_detectors = 0;
};

// Writes volume_t (nx, ny), x-major: volume_t[ix * ny + iy] = volume[iy * nx + ix].
// The forward kernel reads views that step along x from it, so that neighbouring rays
// read neighbouring addresses.
cudaError_t LaunchTranspose(const float* volume, int32_t nx, int32_t ny, float* volume_t,
                            cudaStream_t stream);

// projections[v * num_detectors + k] = A volume, every element written.
// volume: (ny, nx) row-major; volume_t: its transpose (may be null when no view has
// step_along_x); views: num_views JosephView.
cudaError_t LaunchParallel2dForward(const Parallel2dShape& shape, const JosephView* views,
                                    const float* volume, const float* volume_t,
                                    float* projections, cudaStream_t stream);

// volume[iy * nx + ix] = (A^T projections), every element written. Same views as the
// forward launch give the exact transpose.
cudaError_t LaunchParallel2dBack(const Parallel2dShape& shape, const JosephView* views,
                                 const float* projections, float* volume,
                                 cudaStream_t stream);

// spectrum[r * num_bins + f] *= response[f] for r < rows, f < num_bins (complex as
// float2, response real).
cudaError_t LaunchMultiplySpectrum(float2* spectrum, const float* response, int64_t rows,
                                   int32_t num_bins, cudaStream_t stream);

// For a device-resident ramp filter (DeviceRowFilter, cuda_row_filter.h): padded[r *
// length + c] = in[r * columns + c] * weight[(r % weight_rows) * columns + c] *
// column_weight[(r / weight_rows) * columns + c] for c < columns (weight_rows: rows per
// view; either weight may be null: 1), r < rows <= 65535. The padding columns [columns,
// length) are not written: the caller zeroes them once and keeps them zero.
cudaError_t LaunchWeightPadRows(const float* in, const float* weight,
                                const float* column_weight, int32_t weight_rows, int64_t rows,
                                int32_t columns, int32_t length, float* padded,
                                cudaStream_t stream);
// out[r * columns + c] = padded[r * length + c] for r < rows <= 65535, c < columns.
cudaError_t LaunchUnpadRows(const float* padded, int64_t rows, int32_t columns, int32_t length,
                            float* out, cudaStream_t stream);

}  // namespace tomo::core::cuda
