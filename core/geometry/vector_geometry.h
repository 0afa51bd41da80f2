// VectorGeometry: every acquisition as one list of per-view vectors, a validated value.
//
// For each view: the source position (cone beam) or the unit ray direction (parallel
// beam), the centre of the detector, and the detector's u and v vectors: u goes from one
// detector column to the next, v from one row to the next (both in mm, as ASTRA's *_vec
// geometries). Detector pixel (row r, column c) of a FLAT detector is centred at
//   detector_center + (c - (columns - 1) / 2) u + (r - (rows - 1) / 2) v.
// A CYLINDRICAL detector (third-generation CT, DICOM-CT-PD) is curved around the source
// (cone beam only): its columns lie on the circle about the axis through the source along
// v, of radius R = |detector_center - source| (distance from the source to the detector's
// centre, measured perpendicular to v); |u| is the arc length per column at that radius and
// u's direction is the tangent at the centre, so column c is at the fan angle
//   gamma(c) = (c - (columns - 1) / 2) |u| / R
// and pixel (r, c) is centred at
//   detector_center + R ((cos gamma - 1) w + sin gamma u/|u|) + (r - (rows - 1) / 2) v,
// with w the unit vector from the source towards the detector centre, perpendicular to v
// (this is source + R (cos gamma w + sin gamma u/|u|) + ... when the centre is level with
// the source along v). u must be that tangent: perpendicular to v and to w.
//
// 2D geometries are the case of one detector row and a one-slice volume (z = 0); their v is
// (0, 0, 1) times the slice thickness. Projections are Array3D (views, rows, columns).
// docs/geometry.md has the convention, the drawings and the conversions from ASTRA, TIGRE
// and RTK; core/geometry/geometry_builders.h makes geometries from the familiar forms.
//
//   TOMO_ASSIGN_OR_RETURN(VectorGeometry g, MakeCircularCone({...}));
//   Ray ray = g.PixelRay(view, row, column);   // from the source through the pixel centre
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/vec3.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

enum class BeamKind { kParallel, kCone };
enum class DetectorShape { kFlat, kCylindrical };

struct ViewVectors {
  Vec3 source;           // cone: source position, mm; parallel: unit ray direction
  Vec3 detector_center;  // mm
  Vec3 u;                // column step, mm
  Vec3 v;                // row step, mm
};

// A line: origin plus t * direction, direction of unit length. For a cone beam the origin is
// the source; for a parallel beam it is the pixel centre moved back along the ray by
// kParallelRayBackoffMm (far outside any volume), so that t >= 0 covers the object.
struct Ray {
  Vec3 origin;
  Vec3 direction;
};

// The frame of one view of a cylindrical detector, in which both directions of projection
// map points to (column, row): v_unit along the cylinder's axis, w from the source towards
// the detector centre perpendicular to v, e the tangent at the centre (u's direction
// without its v and w parts); radius_mm = R, height_center_mm = the detector centre's
// height above the source along v.
struct CylindricalDetectorFrame {
  Vec3 v_unit, w, e;
  double radius_mm = 0, height_center_mm = 0, u_norm_mm = 0, v_norm_mm = 0;
};
CylindricalDetectorFrame MakeCylindricalDetectorFrame(const ViewVectors& view);

class VectorGeometry {
 public:
  static constexpr int64_t kMaxDetectorSide = 1 << 16;
  static constexpr int64_t kMaxViews = 1 << 20;
  static constexpr double kParallelRayBackoffMm = 1e6;

  // INVALID_ARGUMENT naming the field (as in tomoserve.v1: "views[12].u") and value when:
  // rows or columns outside [1, kMaxDetectorSide]; no views or more than kMaxViews; any
  // vector not finite; u or v of zero length; u parallel to v; a parallel ray direction
  // not of unit length (within 1e-9); the rays parallel to the detector plane (the ray
  // through the detector centre at less than 1e-6 rad to the plane spanned by u and v); a
  // cone source on the detector; a cylindrical detector with a parallel beam
  // or a u not perpendicular to v and w.
  static absl::StatusOr<VectorGeometry> Create(BeamKind beam, DetectorShape detector,
                                               int64_t rows, int64_t columns,
                                               std::vector<ViewVectors> views);

  BeamKind beam() const { return beam_; }
  DetectorShape detector() const { return detector_; }
  int64_t rows() const { return rows_; }
  int64_t columns() const { return columns_; }
  int64_t num_views() const { return static_cast<int64_t>(views_.size()); }
  const std::vector<ViewVectors>& views() const { return views_; }
  Dims3 projection_dims() const { return {num_views(), rows_, columns_}; }

  // Centre of detector pixel (row, column) of a view; row and column may be fractional.
  Vec3 PixelPosition(int64_t view, double row, double column) const;
  // The ray that ends at that pixel centre (see Ray).
  Ray PixelRay(int64_t view, double row, double column) const;

  // INVALID_ARGUMENT when a cone source lies inside the volume's box (naming the view and
  // the source position), or, for a one-row detector (a 2D geometry), the volume has more
  // than one slice.
  absl::Status CheckAgainstVolume(const VolumeGeometry& volume) const;

 private:
  VectorGeometry(BeamKind beam, DetectorShape detector, int64_t rows, int64_t columns,
                 std::vector<ViewVectors> views)
      : beam_(beam), detector_(detector), rows_(rows), columns_(columns),
        views_(std::move(views)) {}
  BeamKind beam_;
  DetectorShape detector_;
  int64_t rows_;
  int64_t columns_;
  std::vector<ViewVectors> views_;
};

}  // namespace tomo::core
