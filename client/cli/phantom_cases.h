// Test cases with an exact answer, for `tomo phantom`: a geometry, the phantom's analytic
// projections in it (line integrals of ellipses or ellipsoids, never our projector) and the
// phantom itself rasterised on the reconstruction grid.
//
//   parallel-2d  modified Shepp-Logan, views over 180 degrees, detector spacing = voxel.
//   fan-2d       the same phantom (extruded, so in-plane rays see exactly its 2D line
//                integrals), flat detector, source-origin 2 N voxels, origin-detector N,
//                views over 360 degrees, enough columns to see the whole grid.
//   cone         3D Shepp-Logan on an N^3 grid, flat detector, source-origin 3 N voxels,
//                origin-detector N (as the cone benchmarks), views over 360
//                degrees, enough rows and columns to see the whole grid.
//   radon-3d     3D Shepp-Logan on an N^3 grid, its exact plane integrals (EPR imaging's 3D
//                Radon transform) along `views` directions of the uniform-solid-angle
//                scheme, samples one voxel apart reaching the grid's corners.
//
//   TOMO_ASSIGN_OR_RETURN(PhantomCase c, MakePhantomCase({PhantomGeometry::kCone, 64, 360}));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

enum class PhantomGeometry { kParallel2D, kFan2D, kCone, kRadon3D };

struct PhantomCaseOptions {
  PhantomGeometry geometry = PhantomGeometry::kParallel2D;
  int64_t size = 512;           // voxels per side
  int64_t views = 720;
  int64_t detectors = 0;        // columns; 0: enough to see the whole grid
  double voxel_size_mm = 0.5;
  // false: the geometry and volume only (`tomo spec`); projections and truth stay empty.
  bool with_projections = true;
};

struct PhantomCase {
  tomoserve::v1::Geometry geometry;
  tomoserve::v1::Volume volume;
  core::Array3D projections;  // (views, rows, columns); radon-3d: (directions, 1, samples)
  core::Array3D truth;        // (z, y, x)
  std::string description;    // e.g. "cone 64^3, 360 views"
};

// Columns (or rows) of `spacing` that cover a half-width on both sides, plus two spare
// elements on each side.
int64_t CoveringCount(double half_width, double spacing);

// A fan or cone beam around an N-voxel grid of side_mm: the detector spacing that maps one
// voxel at the axis onto one pixel, and the half-width and half-height (mm, at the
// detector) that see the whole grid: the rays grazing its circumscribed circle, and its top
// and bottom edges where they come nearest the source.
struct SeeingDetector {
  double spacing_mm;
  double half_width_mm;
  double half_height_mm;
};
SeeingDetector DetectorSeeingTheGrid(double side_mm, double voxel_mm, double source_origin_mm,
                                     double origin_detector_mm);

// INVALID_ARGUMENT naming the option (--size, --views, --detectors, --voxel-size) and its
// range, or the geometry's own error.
absl::StatusOr<PhantomCase> MakePhantomCase(const PhantomCaseOptions& options);

}  // namespace tomo::cli
