// Row ART (Kaczmarz): the classic algebraic reconstruction technique, one row at a time,
//   x <- P( x + lambda (b_i - a_i x) / ||a_i||^2 a_i )   for i = 0, 1, ..., rows - 1,
// on one thread, the reference block ART (block_art.h) is measured against. The clamp P to
// x >= 0 touches the row's pixels after each row when options.nonnegative.
// Progress after every sweep; the cancellation check before every sweep. Errors as
// RunBlockArt (views_per_block must be 0).
//
//   TOMO_ASSIGN_OR_RETURN(ArtResult r, RunRowArt(csr, sinogram, options, context));
#pragma once

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/system_matrix/art_options.h"
#include "core/system_matrix/block_art.h"
#include "core/system_matrix/csr_system_matrix.h"

namespace tomo::core::system_matrix {

absl::StatusOr<ArtResult> RunRowArt(const CsrSystemMatrix& a, const Array3D& projections,
                                    const ArtOptions& options, const RunContext& context);

}  // namespace tomo::core::system_matrix
