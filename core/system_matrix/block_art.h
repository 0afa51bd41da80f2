// Block ART on a stored system matrix (CPU reference of the CUDA version, cuda/):
//
//   for every block b of views, in order:   x <- P( x + A_b^T (C_b .* (b_b - A_b x)) )
//   C_b,i = lambda / (S_b ||a_i||^2)   (0 where ||a_i||^2 <= 1e-20: a ray missing the grid)
//
// with S_b = ViewBlocks::MaxRowsPerPixel(b), the most rows of the block meeting one pixel,
// and P the clamp to x >= 0 when asked. This is component averaging (Censor, Gordon and
// Gordon) with its per-pixel counts bounded by their maximum: it converges for lambda in
// (0, 2), and for a block of one row it is Kaczmarz's step. Views of one block are updated
// simultaneously, blocks one after the other.
//
// Progress after every sweep (stage "art"), with the sweep's relative residual; the
// cancellation check before every sweep. Errors: INVALID_ARGUMENT for bad options (naming
// the field) or projections of the wrong shape; CANCELLED.
//
//   SymmetricViewBlocks blocks(matrix);
//   TOMO_ASSIGN_OR_RETURN(ArtResult r, RunBlockArt(blocks, sinogram, options, context));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/system_matrix/art_options.h"
#include "core/system_matrix/view_blocks.h"

namespace tomo::core::system_matrix {

struct ArtResult {
  Array3D image;                        // (1, ny, nx)
  int64_t iterations_run = 0;
  std::vector<double> relative_residuals;  // per sweep
};

// The end of sweep `sweep` (1-based) of any ART (row, block, on the CPU or CUDA), given the
// squared residual summed over the sweep's rows and ||b||^2: appends the relative residual
// to result, reports progress (stage "art", iteration k of n, the residual) and returns
// whether options.stop_relative_residual ends the run.
bool FinishArtSweep(int64_t sweep, double residual2, double b_norm2, const ArtOptions& options,
                    const RunContext& context, ArtResult& result);

// projections: (views, 1, columns). symmetric_format says which ValidateArtOptions applies.
absl::StatusOr<ArtResult> RunBlockArt(const ViewBlocks& blocks, const Array3D& projections,
                                      const ArtOptions& options, bool symmetric_format,
                                      const RunContext& context);

}  // namespace tomo::core::system_matrix
