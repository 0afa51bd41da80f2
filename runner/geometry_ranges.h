// The physically meaningful ranges of the lengths, positions and angles a JobSpec gives its
// geometry and volume. ValidateJobSpec (job_spec.h) checks finiteness and signs, and the
// core's builders check the relations between values; these checks refuse the finite
// values no scanner has (a detector spacing of 1e308 mm or 5e-324 mm, a volume centre at
// 1e300 mm), which would otherwise make a volume of NaN or zeros that ends SUCCEEDED.
//
// The ranges (docs/limits.md lists them for users):
//   pixel and voxel sizes (detector spacings, |u|, |v| of view vectors, voxel sizes, the
//   radon_3d sample spacing)
//                                   [1e-5, 1e3] mm: 10 nm (nano-CT) to 1 m
//   source-origin distances         [1e-3, 1e5] mm
//   origin-detector distances       [-1e5, 1e5] mm (the builders require the detector
//                                   beyond the source)
//   positions (volume centre, view vectors' sources and detector centres, helical
//   z_start and pitch)              [-1e5, 1e5] mm: 100 m either way
//   detector offsets                at most 10 detector extents (spacing x count) either
//                                   way along their axis
//   angles (uniform start, list)    [-1e7, 1e7] degrees: many helical turns, and radians
//                                   still exact to 1e-9
// Each refusal is INVALID_ARGUMENT naming the field's proto path, its value and the range,
// e.g. "geometry.cone.detector.column_spacing_mm: 1e+308 is out of range [1e-05, 1000] mm".
//
// Thread-safe (pure functions).
//
//   TOMO_RETURN_IF_ERROR(CheckGeometryRanges(spec.geometry()));
//   TOMO_RETURN_IF_ERROR(CheckVolumeRanges(spec.volume()));
#pragma once

#include "absl/status/status.h"
#include "core/geometry/vector_geometry.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

inline constexpr double kMinPixelSizeMm = 1e-5;
inline constexpr double kMaxPixelSizeMm = 1e3;
inline constexpr double kMinSourceOriginMm = 1e-3;
inline constexpr double kMaxDistanceMm = 1e5;
inline constexpr double kMaxOffsetInDetectorExtents = 10;
inline constexpr double kMaxAngleDeg = 1e7;

// Every length, position and angle of the geometry in its range. OK for a geometry kind
// not set (ValidateJobSpec names that) and for from_input_files (the files' values are
// checked when read).
absl::Status CheckGeometryRanges(const tomoserve::v1::Geometry& geometry);

// The voxel sizes (z only when set: 0 takes the x size) and the centre.
absl::Status CheckVolumeRanges(const tomoserve::v1::Volume& volume);

// The same ranges for a geometry read from the input files (DICOM-CT-PD): every view's
// source (cone) and detector centre within the position range, |u| and |v| within the
// pixel size range; errors name "geometry (from the input files).views[i]...".
absl::Status CheckVectorGeometryRanges(const core::VectorGeometry& geometry);

}  // namespace tomo::server
