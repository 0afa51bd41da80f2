// StoredMatrix: the one entry point for a job that reconstructs with ART on a stored system
// matrix: from (geometry, volume, format, memory budget) it counts the bytes (refusing a
// matrix over the budget before building anything), builds the symmetric format when the
// scan has the square symmetry (or CSR: kAutomatic), says which it used and why, and runs
// block ART on the CPU. The CUDA side takes the matrix inside (cuda/device_stored_matrix.h).
//
// Errors: INVALID_ARGUMENT for geometries that are not 2D fan beams (FanScan::Create);
// FAILED_PRECONDITION for kSymmetric on a scan without the symmetry; RESOURCE_EXHAUSTED
// naming the bytes and the budget; RunStoredArt's as RunBlockArt's.
//
//   TOMO_ASSIGN_OR_RETURN(StoredMatrix m, BuildStoredMatrix(geometry, volume,
//                                                           MatrixFormat::kAutomatic, budget));
//   LOG << MatrixFormatName(m.format()) << " (" << m.symmetry() << "), " << m.bytes();
//   TOMO_ASSIGN_OR_RETURN(ArtResult art, RunStoredArt(m, sinogram, options, context));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/system_matrix/art_options.h"
#include "core/system_matrix/block_art.h"
#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/matrix_memory.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/view_blocks.h"

namespace tomo::core::system_matrix {

class StoredMatrix {
 public:
  MatrixFormat format() const { return need_.format; }
  // "eight-fold", or why the scan lacks the symmetry.
  const std::string& symmetry() const { return need_.symmetry; }
  uint64_t bytes() const { return need_.bytes; }
  // What it holds now: bytes() and the tiled layouts built from its symmetric matrix since
  // (SymmetricSystemMatrix::TiledLayout; an upload for the tiled kernels builds one).
  uint64_t held_bytes() const {
    return bytes() + (symmetric_ ? symmetric_->tiled_layout_bytes() : 0);
  }
  // Lets go of those layouts (SymmetricSystemMatrix::ForgetTiledLayouts): held_bytes()
  // falls back to bytes().
  void ForgetTiledLayouts() const {
    if (symmetric_) symmetric_->ForgetTiledLayouts();
  }
  const MatrixBytes& counted() const { return need_; }
  // Exactly one is set, as format() says.
  const SymmetricSystemMatrix* symmetric() const { return symmetric_ ? &*symmetric_ : nullptr; }
  const CsrSystemMatrix* csr() const { return csr_ ? &*csr_ : nullptr; }
  // The blocks ART runs on (views_per_block as ArtOptions: 0 is the format's own choice).
  // They refer to this object, which must stay where it is while they live.
  std::unique_ptr<ViewBlocks> Blocks(int64_t views_per_block) const;

 private:
  friend absl::StatusOr<StoredMatrix> BuildStoredMatrix(const VectorGeometry&,
                                                        const VolumeGeometry&, MatrixFormat,
                                                        uint64_t, int);
  MatrixBytes need_;
  std::optional<SymmetricSystemMatrix> symmetric_;
  std::optional<CsrSystemMatrix> csr_;
};

// budget_bytes 0: no limit. threads 0: all.
absl::StatusOr<StoredMatrix> BuildStoredMatrix(const VectorGeometry& geometry,
                                               const VolumeGeometry& volume, MatrixFormat format,
                                               uint64_t budget_bytes, int threads = 0);

// Block ART on the CPU (block_art.h) with the matrix's own blocks.
absl::StatusOr<ArtResult> RunStoredArt(const StoredMatrix& matrix, const Array3D& projections,
                                       const ArtOptions& options, const RunContext& context);

// The bytes the matrix would take, without building it (matrix_memory.h), from the job's
// geometry and volume.
absl::StatusOr<MatrixBytes> EstimateMatrixBytes(const VectorGeometry& geometry,
                                                const VolumeGeometry& volume, MatrixFormat format);

}  // namespace tomo::core::system_matrix
