// The band of detector rows a volume projects onto, and that band as a detector of its own.
// A device that reconstructs one z-slab of a cone-beam volume needs only the rows the slab's
// voxels project onto (about half the detector for half the volume at the usual cone
// angles), so it uploads and filters only those (the ramp filter works along rows, so
// cutting rows changes nothing in the ones kept).
//
//   const RowBand band = DetectorRowBand(geometry, slab_volume);
//   TOMO_ASSIGN_OR_RETURN(VectorGeometry band_geometry, RowBandGeometry(geometry, band));
//   // projections rows [band.first, band.first + band.count) of every view go with it
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct RowBand {
  int64_t first = 0;
  int64_t count = 0;
};

// Over all views, the rows onto which some voxel centre of `volume` projects, widened to
// the row below and above (the back projector interpolates between two rows), clamped to
// the detector; at least two rows where the detector has two (a one-row detector means a 2D
// geometry; a volume that projects entirely off the detector gets the rows at the nearest
// edge, which is all the interpolation there reads). Exact bounds where
// the row coordinate is linear (parallel beams) or projective (flat cone detectors) over
// the volume's box, i.e. at its corners; for cylindrical detectors a bound from the ranges
// of height and in-plane distance (v along z only). Every row when a voxel can lie at or
// behind a cone source's detector-parallel plane, or for a cylindrical v not along z.
RowBand DetectorRowBand(const VectorGeometry& geometry, const VolumeGeometry& volume);

// The same pixels of rows [band.first, band.first + band.count) as a geometry of
// band.count rows (the detector centre moved along v). INVALID_ARGUMENT when the band is
// empty or not inside the detector.
absl::StatusOr<VectorGeometry> RowBandGeometry(const VectorGeometry& geometry,
                                               const RowBand& band);

}  // namespace tomo::core
