// The weights of BackProjectionWeighting::kMatched: what makes the voxel-driven back
// projection close to the transpose of Joseph's forward projection (backend.h), in the
// projector's units (projector_model.h).
//
// Why these weights: per view, Joseph's transpose adds to a voxel the ray values near it,
// each times its path length per plane and interpolation weight; summed over the rays
// near a voxel that is the voxel's volume V times the density of rays there, perpendicular
// to them. For a detector pixel of area A seen at angle a from its normal, the rays are
// A cos a apart on the detector and (U / D) times that at the voxel (cone beams, U the
// voxel's depth and D the detector's along the normal), so the transpose is the
// interpolated value times
//   V / (A cos a) (D / U)^2   (3D cone beams),   V / (A cos a)   (parallel beams),
// and, for 2D geometries (one detector row, one slice), where rays diverge in the plane
// only, dx dy / (|u| cos a) (D / U). The voxel-driven back projector samples each view at
// the voxel's projection, so a is the angle at that pixel; kMatched takes, per view, the
// mean of 1 / cos a over the detector (exact for parallel beams, where a is the same
// everywhere) and the distance weight (D / U)^p of the kernels, p = 2 (3D cone), 1 (2D fan)
// or 0 (parallel). Cylindrical detectors: A = |u| |v|, a the angle of the ray above the
// plane of the fan, D / U = R / rho as for kFdk.
//
//   MatchedWeights w = MakeMatchedWeights(geometry, volume);
//   // back projection adds   w.view_scale[v] * (D / U)^w.distance_power * sample
#pragma once

#include <vector>

#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct MatchedWeights {
  std::vector<double> view_scale;  // per view: V / (A <cos a>^-1), in mm (V / A)
  int distance_power = 0;          // p: 2 for 3D cone beams, 1 for 2D fan beams, 0 parallel
};

MatchedWeights MakeMatchedWeights(const VectorGeometry& geometry, const VolumeGeometry& volume);

}  // namespace tomo::core
