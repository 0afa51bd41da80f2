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

#include <cstdint>
#include <memory>

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
  // projections: (views, 1, columns).
  virtual absl::StatusOr<ArtResult> RunArt(const Array3D& projections, const ArtOptions& options,
                                           const RunContext& context) = 0;
};

absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadSymmetricMatrix(
    const SymmetricSystemMatrix& matrix, int device);
// views_per_block as ArtOptions::views_per_block (0: one view); RunArt's options must
// carry the same value.
absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadCsrMatrix(const CsrSystemMatrix& matrix,
                                                                    int64_t views_per_block,
                                                                    int device);

}  // namespace tomo::core::system_matrix
