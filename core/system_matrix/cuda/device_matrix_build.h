// BuildSymmetricMatrixOnDevice: the symmetric format's stored rows computed by CUDA kernels
// (matrix_build.cu: a counting pass, a prefix sum on the host, a filling pass) with the
// CPU build's arithmetic (strip_geometry.h), brought back into a SymmetricSystemMatrix.
// The same entries as SymmetricSystemMatrix::Build: extents identical, weights within a
// float32 rounding.
//
// Errors: as SymmetricSystemMatrix::Build for scans without the symmetry;
// RESOURCE_EXHAUSTED when the device lacks memory; INTERNAL for CUDA failures or if the
// filling pass disagrees with the counts.
//
//   TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix a, BuildSymmetricMatrixOnDevice(scan, 0));
#pragma once

#include "absl/status/statusor.h"
#include "core/system_matrix/fan_scan.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

absl::StatusOr<SymmetricSystemMatrix> BuildSymmetricMatrixOnDevice(const FanScan& scan,
                                                                   int device);

}  // namespace tomo::core::system_matrix
