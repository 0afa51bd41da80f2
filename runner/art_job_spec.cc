#include "runner/art_job_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
namespace sm = ::tomo::core::system_matrix;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("algorithm.art", field.empty() ? "" : ".",
                                                 field, ": ", what));
}

}  // namespace

absl::StatusOr<core::StoredArtOptions> ValidateStoredMatrixArt(
    const pb::StoredMatrixArtOptions& given, const pb::Geometry& geometry, int64_t views) {
  if (!geometry.has_fan_2d()) {
    return Invalid("", "ART on a stored system matrix takes geometry.fan_2d only (a 2D fan "
                       "beam); use sirt, sart, os_sart or cgls for other geometries");
  }
  core::StoredArtOptions options;
  if (given.iterations() < 1) {
    return Invalid("iterations", "0 is out of range [1, --max_iterations]");
  }
  options.art.iterations = given.iterations();
  if (given.has_relaxation()) {
    const double lambda = given.relaxation();
    if (!(lambda > 0 && lambda < 2)) {
      return Invalid("relaxation", absl::StrCat(lambda, " is out of range (0, 2)"));
    }
    options.art.relaxation = lambda;
  }
  const double stop = given.stop_relative_residual();
  if (!(stop >= 0 && stop < 1)) {
    return Invalid("stop_relative_residual", absl::StrCat(stop, " is out of range [0, 1)"));
  }
  options.art.stop_relative_residual = stop;
  options.art.nonnegative = given.has_nonnegative() ? given.nonnegative() : true;
  switch (given.matrix_format()) {
    case pb::MATRIX_FORMAT_UNSPECIFIED:
    case pb::MATRIX_FORMAT_AUTOMATIC:
      options.format = sm::MatrixFormat::kAutomatic;
      break;
    case pb::MATRIX_FORMAT_SYMMETRIC:
      options.format = sm::MatrixFormat::kSymmetric;
      break;
    case pb::MATRIX_FORMAT_CSR:
      options.format = sm::MatrixFormat::kCsr;
      break;
    default:
      return Invalid("matrix_format",
                     absl::StrCat(static_cast<int>(given.matrix_format()),
                                  " is out of range [0, 3] (MATRIX_FORMAT_AUTOMATIC, _SYMMETRIC, "
                                  "_CSR; 0 means AUTOMATIC)"));
  }
  if (given.views_per_block() > 0) {
    if (options.format != sm::MatrixFormat::kCsr) {
      return Invalid("views_per_block",
                     absl::StrCat(given.views_per_block(),
                                  " needs matrix_format MATRIX_FORMAT_CSR (the symmetric "
                                  "format's blocks are the orbits of its symmetry); 0 means "
                                  "the format's own choice"));
    }
    if (given.views_per_block() > static_cast<uint64_t>(views)) {
      return Invalid("views_per_block", absl::StrCat(given.views_per_block(),
                                                     " is out of range [0, ", views, "]"));
    }
  }
  options.art.views_per_block = given.views_per_block();
  switch (given.kernels()) {
    case pb::ART_KERNELS_UNSPECIFIED:
    case pb::ART_KERNELS_ORBIT:
      options.kernels = core::StoredArtKernels::kOrbit;
      break;
    case pb::ART_KERNELS_TILED:
      if (options.format == sm::MatrixFormat::kCsr) {
        return Invalid("kernels", "ART_KERNELS_TILED needs the symmetric format "
                                  "(matrix_format MATRIX_FORMAT_AUTOMATIC or _SYMMETRIC); CSR "
                                  "has kernels of its own");
      }
      options.kernels = core::StoredArtKernels::kTiled;
      break;
    default:
      return Invalid("kernels", absl::StrCat(static_cast<int>(given.kernels()),
                                             " is out of range [0, 2] (ART_KERNELS_ORBIT, "
                                             "_TILED; 0 means ORBIT)"));
  }
  return options;
}

}  // namespace tomo::server
