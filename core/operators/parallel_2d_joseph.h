// Joseph's projector for 2D parallel beams, the part every backend shares: the argument
// checks and the per-view parameters, computed once on the host in float64 so that the
// CPU reference and the CUDA kernels evaluate the same operator with the same numbers and
// the same case decisions (at exactly 45 degrees too).
//
// The ray through detector element k at angle t is the line x cos t + y sin t = s_k. It is
// marched one image line at a time: rows (constant y) when |cos t| >= |sin t|, else
// columns. On line `line` it crosses the other axis at the fractional pixel index
//   position(k, line) = per_detector * k + per_line * line + offset,
// is interpolated linearly between floor(position) and floor(position) + 1, and weighted
// by path_length, the mm of ray per line.
//
//   TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, sinogram));
//   for (const JosephViewParameters& view : MakeJosephViews(geometry, volume_geometry)) ...
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct JosephViewParameters {
  bool step_rows = true;  // march rows (lines of constant y); else columns
  double per_detector = 0;  // d position / d k, never 0
  double per_line = 0;      // d position / d line
  double offset = 0;        // position(0, 0)
  double path_length = 0;   // mm of ray per line
};

std::vector<JosephViewParameters> MakeJosephViews(const ParallelGeometry2D& geometry,
                                                  const VolumeGeometry& volume_geometry);

// INVALID_ARGUMENT when the volume is not a single slice or an array's dims do not match
// the geometry (the message shows both dims).
absl::Status CheckProjectorOperands(const ParallelGeometry2D& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const Array3D& volume, const Array3D& projections);

}  // namespace tomo::core
