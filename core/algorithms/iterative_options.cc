#include "core/algorithms/iterative_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::Status ValidateIterativeOptions(const IterativeOptions& options,
                                      const VolumeGeometry& volume, bool constrained_method) {
  if (options.iterations < 1 || options.iterations > IterativeOptions::kMaxIterations) {
    return absl::InvalidArgumentError(absl::StrCat("iterations: ", options.iterations,
                                                   " is out of range [1, ",
                                                   IterativeOptions::kMaxIterations, "]"));
  }
  if (constrained_method) {
    if (!(options.relaxation > 0 && options.relaxation < 2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("relaxation: ", options.relaxation, " is out of range (0, 2)"));
    }
  } else if (options.relaxation != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "relaxation: ", options.relaxation, " is not used by CGLS (which takes exact line "
        "search steps); leave it unset"));
  }
  if (std::isnan(options.lower_bound) || std::isnan(options.upper_bound) ||
      options.lower_bound > options.upper_bound) {
    return absl::InvalidArgumentError(absl::StrCat("lower_bound: ", options.lower_bound,
                                                   " must not be NaN nor exceed upper_bound ",
                                                   options.upper_bound));
  }
  if (!constrained_method &&
      (std::isfinite(options.lower_bound) || std::isfinite(options.upper_bound))) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::isfinite(options.lower_bound) ? "lower_bound: " : "upper_bound: ",
        std::isfinite(options.lower_bound) ? options.lower_bound : options.upper_bound,
        " is not supported by CGLS (an unconstrained method); use SIRT, SART or OS-SART for "
        "constraints"));
  }
  if (!(options.stop_relative_residual >= 0 && options.stop_relative_residual < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("stop_relative_residual: ",
                                                   options.stop_relative_residual,
                                                   " is out of range [0, 1) (0: never stop early)"));
  }
  if (options.initial_volume != nullptr && options.initial_from_fbp) {
    return absl::InvalidArgumentError(
        "initial_volume: given together with the FBP start (initial_from_fbp); choose one");
  }
  if (options.initial_volume != nullptr &&
      options.initial_volume->dims() != volume.dims()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_volume: dims ", DimsText(options.initial_volume->dims()),
                     " do not match the volume's ", DimsText(volume.dims()), " (z, y, x)"));
  }
  return absl::OkStatus();
}

}  // namespace tomo::core
