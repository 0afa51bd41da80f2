// The two forms of a 2D parallel-beam acquisition: ParallelGeometry2D (angles, detector
// spacing and offset: what Joseph's exact-transpose 2D projector takes) and the one-row
// VectorGeometry that every algorithm receives. A 2D parallel beam is a VectorGeometry; the
// ParallelGeometry2D form is recovered from it where the exact-transpose pair is wanted.
//
//   TOMO_ASSIGN_OR_RETURN(VectorGeometry g, ParallelGeometry2DAsVectors(parallel, volume));
//   std::optional<ParallelGeometry2D> exact = ExactParallel2DForm(g, volume);  // == parallel
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// The one-row VectorGeometry of a 2D parallel beam (MakeParallel2D), its row as high as the
// volume's slice.
absl::StatusOr<VectorGeometry> ParallelGeometry2DAsVectors(const ParallelGeometry2D& geometry,
                                                           const VolumeGeometry& volume);

// The ParallelGeometry2D whose rays and detector positions are those of `geometry` on a
// one-slice `volume`, or nullopt when there is none: not a parallel beam on a flat one-row
// detector; a ray or u leaving the slice's plane; u not perpendicular to the ray, or not
// turned from it as the convention has it (u = (cos t, sin t), ray = (sin t, -cos t)); the
// column spacing or the detector's offset along u changing from view to view; the detector
// row not centred on the slice; a volume of more than one slice. Angles are recovered as
// atan2 of u: equal to the original ones up to float64 rounding.
std::optional<ParallelGeometry2D> ExactParallel2DForm(const VectorGeometry& geometry,
                                                      const VolumeGeometry& volume);

}  // namespace tomo::core
