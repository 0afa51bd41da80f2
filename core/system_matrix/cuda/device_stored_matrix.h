// DeviceStoredMatrix: a stored system matrix resident on one CUDA device, with its whole
// products and block ART (the CUDA counterpart of view_blocks.h and block_art.h).
//
//   UploadSymmetricMatrix: the symmetric format (symmetric_system_matrix.h): blocks are the
//     orbits; per block a forward pass that reads the stored rows once for all the orbit's
//     views, then a pixel-owned transposed pass (no atomics, same result whatever the thread
//     order).
//   UploadCsrMatrix: plain CSR for scans without the symmetry; blocks of views_per_block
//     views as CsrViewBlocks; the transposed pass scatters with atomicAdd.
// Block ART follows RunBlockArt step for step (same C_b, same order, clamp after each
// block) in float32 on the device; its residual is measured the same way.
//
// Not thread-safe (one stream). Errors: RESOURCE_EXHAUSTED when the device lacks memory,
// INTERNAL for other CUDA failures (cuda_check.h), INVALID_ARGUMENT for bad options or
// shapes (naming the field), CANCELLED.
//
//   TOMO_ASSIGN_OR_RETURN(auto device_matrix, UploadSymmetricMatrix(matrix, /*device=*/0));
//   TOMO_ASSIGN_OR_RETURN(ArtResult art, device_matrix->RunArt(sinogram, options, context));
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/system_matrix/art_options.h"
#include "core/system_matrix/block_art.h"
#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

class DeviceStoredMatrix {
 public:
  virtual ~DeviceStoredMatrix() = default;
  // Bytes of the matrix's arrays on the device.
  virtual uint64_t matrix_bytes() const = 0;
  // Host arrays: y (views x columns) = A x (ny x nx); x = A^T y.
  virtual absl::Status Forward(const float* x, float* y) = 0;
  virtual absl::Status Back(const float* y, float* x) = 0;
  // Device arrays on this matrix's device, the work queued on stream() (what a projector of
  // a block of views needs): y[k * columns + c] = (A x) at views[k], column c; x += A^T z
  // over those rows, z laid out as y. Any views in any order, each at most once
  // (INVALID_ARGUMENT naming the entry otherwise). The symmetric format groups the views by
  // stored view (a group shares one pass over the stored rows); its transposed pass adds
  // group by group, each pixel written by its own thread.
  virtual absl::Status ForwardViewsOnDevice(const std::vector<int64_t>& views, const float* x,
                                            float* y) = 0;
  virtual absl::Status BackViewsAddOnDevice(const std::vector<int64_t>& views, const float* z,
                                            float* x) = 0;
  virtual cudaStream_t stream() const = 0;
  // Whether RunArt runs each sweep as one launch (SymmetricKernels::kTiledSweep where the
  // device allows it).
  virtual bool one_launch_sweeps() const { return false; }
  // How many blocks' slots those sweeps hold in shared memory, copied there for their
  // products (on devices of compute capability 9.0 and above): 2 (each block's copied
  // during the block before), 1 (during the block before's write-back), or 0 (the products
  // read them from device memory).
  virtual int sweep_slot_buffers() const { return 0; }
  // Whether the one-launch sweep keeps x in shared memory for the whole sweep (else x goes
  // through device memory at each block's write-back).
  virtual bool sweep_resident_x() const { return false; }
  // projections: (views, 1, columns).
  virtual absl::StatusOr<ArtResult> RunArt(const Array3D& projections, const ArtOptions& options,
                                           const RunContext& context) = 0;
};

// The kernels the symmetric format runs its products with (system-matrix-bench --kernel
// compares them in one run). All give the same products to float rounding.
enum class SymmetricKernels {
  // Forward: one warp per stored row (and segment), a lane per run. Transpose: one thread
  // per output pixel, finding for each view the stored rays that meet it (symmetric_back.cu).
  kGather,
  // The same forward; transpose with one thread per pixel orbit, each stored weight found
  // once for all the block's views (symmetric_back_orbit.cu).
  kOrbit,
  // Both products on the dense layout (dense_slabs.h, cuda/dense_products.cu): a warp per
  // slab of 32 rows, coalesced loads; the transpose adds with atomicAdd (the layout keeps
  // the lanes of a step apart, not the warps), then clamps and refreshes the image's
  // transposed copy, from which the forward reads the maps whose pixels it would otherwise
  // read across rows. The runs are not uploaded.
  kDense,
  // The dense forward with the orbit transpose (both layouts on the device); ART keeps a
  // transposed copy of the image, written by the orbit transpose, from which the forward
  // reads the maps whose pixels it would otherwise read across rows.
  kDenseOrbit,
  // One layout for both products (interleaved_runs.h: the runs format's values and runs
  // blocked by 32-row groups, column-major): the forward as the dense one, reading a lane's
  // pixel from its runs (cuda/interleaved_forward.cu), and the orbit transpose on the same
  // arrays; ART keeps the image's transposed copy as kDenseOrbit. Only this layout is on the
  // device.
  kBlocked,
  // One layout for both products with the lanes of a step side by side
  // (segmented_runs.h: 32-row groups cut by position along their march axis, runs per
  // column instead of a pixel per entry): its forward (cuda/segmented_forward.cu) and the
  // orbit transpose on the same arrays; ART keeps the image's transposed copy. Only this
  // layout is on the device.
  kSegmented,
  // Both products on the tiled layout (tiled_runs.h, tiled_tasks.h,
  // cuda/tiled_products.cu): orbit of pixel tiles by orbit, x (forward) and the accumulators
  // (transpose) in shared memory, the matrix streamed in coalesced lines, in tasks of at
  // most 8 steps; the forward adds its ray sums with global atomics, a combine kernel forms
  // z, the transpose (one thread block per orbit) writes each tile once (no global atomics).
  // An ART block is three launches. slab_steps > 0 is the tile side (0: its default,
  // TiledRuns::TileSideFor). Only this layout is on the device.
  kTiled,
  // kTiled with each ART launch allowed to start while the previous one ends (programmatic
  // dependent launch): its thread blocks read what does not depend on the previous kernel,
  // then wait; the transpose prefetches the next block's slots into L2 (views of at most
  // 16 MB).
  kTiledOverlap,
  // kTiledOverlap with the transpose's shared accumulators in int32 fixed point (one integer
  // add each instead of a float compare-and-store loop; scaled per thread block so that no
  // sum overflows; each add within 5e-10 of the block's bound): 2.2x / 2.1x / 2.4x cuSPARSE
  // at 512^2 / 1024^2 / 2048^2 on an H200 (bench/NOTES.md). Its layout is built on the host
  // at the matrix's first upload (seconds; kept with the matrix for later uploads,
  // SymmetricSystemMatrix::TiledLayout).
  kTiledFixed,
  // kTiledFixed's kernels as one cooperative launch per ART sweep (cuda/tiled_products.cu,
  // TiledSweepKernel): each thread block (one or two per multiprocessor) owns orbits of
  // tiles for the whole sweep (cuda/tiled_sweep_owners.h) and runs their forward and
  // transpose; the blocks meet at two grid-wide barriers per ART block (after the forward,
  // after the combine) instead of three launches. Where the device cannot keep the thread blocks resident (no
  // cooperative launch, or their orbits' planes exceed its shared memory) ART takes
  // kTiledFixed's launches: one_launch_sweeps() says which. Where they fit, each block's
  // slots are copied into shared memory for its products (sweep_slot_buffers()). The
  // products are kTiledFixed's. The fastest per sweep measured (bench/NOTES.md: 4.88x /
  // 6.55x / 5.88x cuSPARSE at 512^2 / 1024^2 / 2048^2 on an H200), not the default: the tiled
  // layout's build at first use.
  kTiledSweep,
};
// The default: the fastest measured on an H100 (bench/NOTES.md: 1.12x / 1.24x / 1.09x
// cuSPARSE at 512^2 / 1024^2 / 2048^2), no atomics, the runs format alone on the device.
inline constexpr SymmetricKernels kDefaultSymmetricKernels = SymmetricKernels::kOrbit;
const char* SymmetricKernelsName(SymmetricKernels kernels);
// INVALID_ARGUMENT naming the value and the names allowed.
absl::StatusOr<SymmetricKernels> ParseSymmetricKernels(const std::string& name);
std::vector<SymmetricKernels> AllSymmetricKernels();

// slab_steps: the steps per slab the blocked layouts aim at (0: their default; more steps,
// fewer and longer warps); for kTiled the tile side. most_slot_buffers (kTiledSweep): the
// most blocks' slots the sweep holds in shared memory where they fit (sweep_slot_buffers();
// less than 2 only to compare, as system-matrix-bench does); allow_resident_x: whether x may
// stay in shared memory for the whole sweep where it fits (sweep_resident_x(); false only to
// test the other way, as the device tests do).
absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadSymmetricMatrix(
    const SymmetricSystemMatrix& matrix, int device,
    SymmetricKernels kernels = kDefaultSymmetricKernels, int slab_steps = 0,
    int most_slot_buffers = 2, bool allow_resident_x = true);
// views_per_block as ArtOptions::views_per_block (0: one view); RunArt's options must
// carry the same value.
absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadCsrMatrix(const CsrSystemMatrix& matrix,
                                                                    int64_t views_per_block,
                                                                    int device);

}  // namespace tomo::core::system_matrix
