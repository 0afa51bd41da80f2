// FanScan: a 2D fan-beam scan and its pixel grid as the stored system matrix sees them: for
// every view the source and the detector line (flat) or arc (cylindrical) in the plane z = 0,
// and the grid in pixel units. A plain validated value, built once from a VectorGeometry and
// a VolumeGeometry; everything here is float64 host code.
//
// The "ray" of detector element (view, column) is the wedge between the two lines from the
// source through the element's edges (columns c - 1/2 and c + 1/2 of the detector): the
// X-ray beam that reaches that element. Its angle is RayWedge::angle_rad.
//
//   TOMO_ASSIGN_OR_RETURN(FanScan scan, FanScan::Create(geometry, volume));
//   RayWedge wedge = scan.Wedge(view, column);
//   double c = scan.ColumnCoordinate(view, x_mm, y_mm);  // where the ray through a point lands
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core::system_matrix {

struct Point2 {
  double x = 0, y = 0;
};
inline Point2 operator-(Point2 a, Point2 b) { return {a.x - b.x, a.y - b.y}; }
inline double Cross(Point2 a, Point2 b) { return a.x * b.y - a.y * b.x; }

// The wedge of one ray: points p with Cross(edge0, p - apex) >= 0 and
// Cross(p - apex, edge1) >= 0 (edge1 counter-clockwise of edge0, less than pi apart).
struct RayWedge {
  Point2 apex;           // the source, mm
  Point2 edge0, edge1;   // directions of the two edge lines, mm (not normalised)
  double angle_rad = 0;  // between edge0 and edge1
};

struct FanView {
  Point2 source;           // mm
  Point2 detector_center;  // mm
  Point2 u;                // column step (flat) or arc tangent times arc step (cylindrical)
};

class FanScan {
 public:
  // INVALID_ARGUMENT naming the field when the geometry is not a 2D fan beam (beam must be
  // cone, one detector row, the volume one slice) or CheckAgainstVolume fails.
  static absl::StatusOr<FanScan> Create(const VectorGeometry& geometry,
                                        const VolumeGeometry& volume);

  int64_t num_views() const { return static_cast<int64_t>(views_.size()); }
  int64_t columns() const { return columns_; }
  int64_t rows() const { return num_views() * columns_; }  // rows of the system matrix
  bool cylindrical() const { return cylindrical_; }
  const std::vector<FanView>& views() const { return views_; }
  // Grid: nx by ny pixels of pixel_x_mm by pixel_y_mm; pixel (ix, iy) spans
  // [left + ix dx, left + (ix + 1) dx] x [bottom + iy dy, bottom + (iy + 1) dy].
  int64_t nx() const { return nx_; }
  int64_t ny() const { return ny_; }
  double pixel_x_mm() const { return dx_; }
  double pixel_y_mm() const { return dy_; }
  double left_mm() const { return left_; }
  double bottom_mm() const { return bottom_; }
  Point2 grid_center_mm() const { return {left_ + 0.5 * nx_ * dx_, bottom_ + 0.5 * ny_ * dy_}; }

  RayWedge Wedge(int64_t view, int64_t column) const;
  // The detector column coordinate (column c's centre is c, its edges c -+ 1/2) at which the
  // line from the view's source through the point meets the detector.
  double ColumnCoordinate(int64_t view, double x_mm, double y_mm) const;

 private:
  FanScan() = default;
  std::vector<FanView> views_;
  int64_t columns_ = 0;
  bool cylindrical_ = false;
  int64_t nx_ = 0, ny_ = 0;
  double dx_ = 0, dy_ = 0, left_ = 0, bottom_ = 0;
};

}  // namespace tomo::core::system_matrix
