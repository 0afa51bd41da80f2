// Plain launch functions for the CUDA kernels of the Radon plane-integral projector pair
// (RadonGeometry, core/operators/cpu/cpu_radon_projector.h for the model): radon_back.cu
// (back projection, a gather over directions) and radon_forward.cu (forward projection,
// voxel tiles binned into each direction's samples in shared memory). The only header those
// .cu files include (no Abseil, no core header), as vector_kernels.h; the host side
// (cuda_radon_projector.h) computes the forms in double, owns the buffers and turns the
// returned cudaError_t into absl::Status.
//
// Per direction i the host passes form_i = (x, y, z, w) such that voxel (ix, iy, iz) lies
// at the fractional sample index u = x ix + y iy + z iz + w (radon_sample_forms.h), sample
// k at u = k, samples outside [0, S - 1] reading and receiving 0.
//
// Volumes are (nz, ny, nx) row-major float32, projections (directions, samples). Each
// Launch... function enqueues its work on `stream` and returns cudaGetLastError() taken
// right after the last launch (or the first failing call). Pointers are device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tomo::core::cuda {

struct RadonVolumeShape {
  int32_t nx = 0, ny = 0, nz = 0;
};

struct RadonSamplesShape {
  int32_t num_directions = 0;
  int32_t num_samples = 0;
};

// The largest |x|, |y|, |z| over all directions' forms (host side): they bound the samples
// one block of voxels reaches, which sizes the back projection's shared-memory windows.
struct RadonFormBounds {
  float max_abs_x = 0, max_abs_y = 0, max_abs_z = 0;
};

// volume[z][y][x] (+)= sum_i scales[i] * (linear interpolation of projections[i][.] at
// u_i(x, y, z)). accumulate = 0 overwrites every voxel, 1 adds. forms, scales: num_directions
// each; bounds: of those forms. Each block stages, per chunk of directions, the window of
// samples its voxels reach in shared memory (pre-multiplied by the scale); windows too long
// for shared memory (samples much finer than voxels) read global memory instead.
// voxels_per_thread (along z): 1, 2, 4, 8 or 16, or 0 to choose from the volume's size and
// the device's SM count (for the benchmark to compare); others: cudaErrorInvalidValue.
cudaError_t LaunchRadonBack(const RadonVolumeShape& volume_shape,
                            const RadonSamplesShape& samples_shape, const float4* forms,
                            const RadonFormBounds& bounds, const float* scales,
                            const float* projections, int32_t accumulate, float* volume,
                            cudaStream_t stream, int32_t voxels_per_thread = 0);

// projections[i][k] = mass_per_sample * sum over voxels of volume * hat(u_i - k) (the
// projections are zeroed first; every element written). mass_per_sample = voxel volume /
// sample spacing. The sums are float32 with atomic adds, so their order (and the last bits)
// varies from run to run. cudaErrorInvalidValue when one block's window of samples does not
// fit in shared memory (RadonForwardFits is false).
cudaError_t LaunchRadonForward(const RadonVolumeShape& volume_shape,
                               const RadonSamplesShape& samples_shape, const float4* forms,
                               const RadonFormBounds& bounds, float mass_per_sample,
                               const float* volume, float* projections, cudaStream_t stream);

// Whether the forward kernel serves these bounds: one block's window of samples (31 |x| +
// 7 |y| + 7 |z| + 4) within its 24 KiB of shared memory, which holds for samples down to
// about a hundredth of a voxel. Host-side, no CUDA call.
bool RadonForwardFits(const RadonFormBounds& bounds);

}  // namespace tomo::core::cuda
