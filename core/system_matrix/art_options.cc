#include "core/system_matrix/art_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tomo::core::system_matrix {

absl::Status ValidateArtOptions(const ArtOptions& options, bool symmetric_format,
                                int64_t views) {
  if (!(options.relaxation > 0 && options.relaxation < 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("relaxation: ", options.relaxation, " must be in (0, 2)"));
  }
  if (options.iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterations: ", options.iterations, " must be >= 1"));
  }
  if (!(std::isfinite(options.stop_relative_residual) && options.stop_relative_residual >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("stop_relative_residual: ",
                                                   options.stop_relative_residual,
                                                   " must be a finite value >= 0"));
  }
  if (symmetric_format && options.views_per_block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "views_per_block: ", options.views_per_block,
        " must be 0 for the symmetric format (its blocks are the orbits of the symmetry)"));
  }
  if (!symmetric_format && (options.views_per_block < 0 || options.views_per_block > views)) {
    return absl::InvalidArgumentError(absl::StrCat("views_per_block: ", options.views_per_block,
                                                   " must be in [0, ", views, "]"));
  }
  return absl::OkStatus();
}

}  // namespace tomo::core::system_matrix
