// Small 2D fan-beam scans for the stored system matrix's tests: symmetric ones (flat and
// arc detectors, odd and even grids, pixels other than 1 mm) and ones without the square
// symmetry (view count not a multiple of 4, short scan, offset detector, offset grid).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/geometry/volume_geometry.h"
#include "core/system_matrix/fan_scan.h"

namespace tomo::core::system_matrix {

struct FanCase {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
};

struct FanCaseSpec {
  int64_t views = 32;
  double first_angle_rad = 0;
  double span_rad = 2 * M_PI;
  int64_t columns = 40;
  double column_spacing_mm = 1.3;
  double offset_u_mm = 0;
  DetectorShape shape = DetectorShape::kFlat;
  int64_t n = 25;        // grid n x n (ny = n + extra_y)
  int64_t extra_y = 0;
  double pixel_mm = 0.7;
  double center_x_mm = 0;
  double source_origin_mm = 90;
  double origin_detector_mm = 50;
};

inline FanCase MakeFanCase(const std::string& name, const FanCaseSpec& spec) {
  FanConeOptions fan;
  fan.detector = {1, spec.columns, 1.0, spec.column_spacing_mm, spec.offset_u_mm, 0};
  fan.shape = spec.shape;
  fan.source_origin_mm = spec.source_origin_mm;
  fan.origin_detector_mm = spec.origin_detector_mm;
  fan.angles_rad = UniformAnglesRad(spec.views, spec.first_angle_rad, spec.span_rad);
  return {name, MakeFan2D(fan).value(),
          VolumeGeometry::Create({spec.n, spec.n + spec.extra_y, 1},
                                 {spec.pixel_mm, spec.pixel_mm, spec.pixel_mm},
                                 {spec.center_x_mm, 0, 0})
              .value()};
}

// 8 x 13 views on an odd grid of 97 pixels that no tile or slab side used divides, 131 rays.
inline FanCaseSpec OddFanCaseSpec() {
  FanCaseSpec odd;
  odd.views = 104;
  odd.first_angle_rad = M_PI / 104;
  odd.n = 97;
  odd.pixel_mm = 0.7;
  odd.columns = 131;
  odd.column_spacing_mm = 0.9;
  odd.source_origin_mm = 120;
  odd.origin_detector_mm = 60;
  return odd;
}

// Scans with the eight-fold symmetry.
inline std::vector<FanCase> SymmetricFanCases() {
  std::vector<FanCase> cases;
  FanCaseSpec flat;
  cases.push_back(MakeFanCase("flat-odd-grid-views-at-0", flat));
  FanCaseSpec half_step = flat;
  half_step.views = 40;
  half_step.first_angle_rad = M_PI / 40;  // half of the step: every orbit has 8 views
  half_step.n = 24;
  half_step.pixel_mm = 0.85;
  cases.push_back(MakeFanCase("flat-even-grid-half-step", half_step));
  FanCaseSpec arc = flat;
  arc.shape = DetectorShape::kCylindrical;
  arc.columns = 37;
  arc.column_spacing_mm = 1.5;
  arc.views = 24;
  arc.first_angle_rad = 2 * M_PI / 48;
  cases.push_back(MakeFanCase("arc-odd-columns", arc));
  return cases;
}

// Scans without it, and the reason's key words.
inline std::vector<FanCase> AsymmetricFanCases() {
  std::vector<FanCase> cases;
  FanCaseSpec spec;
  spec.views = 30;
  cases.push_back(MakeFanCase("views-not-multiple-of-4", spec));
  FanCaseSpec short_scan;
  short_scan.span_rad = M_PI + 0.9;
  cases.push_back(MakeFanCase("short-scan", short_scan));
  FanCaseSpec offset;
  offset.offset_u_mm = 3.1;
  cases.push_back(MakeFanCase("offset-detector", offset));
  FanCaseSpec off_centre;
  off_centre.center_x_mm = 0.4;
  cases.push_back(MakeFanCase("grid-off-centre", off_centre));
  FanCaseSpec rectangle;
  rectangle.extra_y = 3;
  cases.push_back(MakeFanCase("rectangular-grid", rectangle));
  return cases;
}

inline FanScan ScanOf(const FanCase& c) { return FanScan::Create(c.geometry, c.volume).value(); }

}  // namespace tomo::core::system_matrix
