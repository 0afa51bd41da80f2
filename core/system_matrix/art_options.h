// ArtOptions: the options of ART on a stored system matrix (block_art.h, row_art.h), a
// typed struct mapped one to one from the JobSpec's `art` algorithm.
//
//   ArtOptions options;
//   options.iterations = 20;
//   TOMO_RETURN_IF_ERROR(ValidateArtOptions(options, /*symmetric_format=*/true, views));
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "core/data/array3d.h"

namespace tomo::core::system_matrix {

struct ArtOptions {
  double relaxation = 1.0;     // lambda, in (0, 2)
  int64_t iterations = 10;     // sweeps over all blocks (row ART: over all rows), >= 1
  // Stop after the sweep whose relative residual ||b - A x|| / ||b|| (measured block by
  // block during the sweep) falls below this; 0: run all iterations.
  double stop_relative_residual = 0;
  bool nonnegative = true;     // clamp x >= 0 after each block (row ART: each row)
  // Block ART only. 0: automatic (the symmetric format's orbits; one view per block for
  // CSR). For CSR, 1 to views; the symmetric format takes only 0.
  int64_t views_per_block = 0;

  // For tests and experiments, not from the JobSpec: called after every sweep with its
  // number (1-based) and the image (on CUDA downloaded for it every sweep: slow). A status
  // other than OK ends the run with it.
  std::function<absl::Status(int64_t sweep, const Array3D& image)> on_sweep;
};

// INVALID_ARGUMENT naming the field, its value and the allowed range.
absl::Status ValidateArtOptions(const ArtOptions& options, bool symmetric_format,
                                int64_t views);

}  // namespace tomo::core::system_matrix
