// The geometry of DICOM-CT-PD projection files (the TCIA/Mayo "LDCT-and-Projection-data"
// format) as one VectorGeometry view per file: the frame, the formulas and what we assume
// where the published dictionary is silent. Shared by the reader and the writer, and
// checked against the formulas below (not against itself) in
// tests/core/io/dicom_ct_pd_geometry_test.cc.
//
// Sources. Tag meanings: the private-tag table of the DICOM-CT-PD format in Moen et al.,
// "Low-dose CT image and projection dataset", Med Phys 48(2):902-911 (2021), Table IV
// (https://pmc.ncbi.nlm.nih.gov/articles/PMC7985836/table/T4), after Chen et al., Med Phys
// 42(8):4438 (2015). Cartesian positions x = -rho sin phi, y = rho cos phi, as public
// readers of the AAPM/Mayo data compute the focal spot; DetectorCentralElement 1-based, as
// ODL's mayo.py uses it (offset = X - 0.5 - columns / 2).
//
// Per view (one file):
//   phi0 (7031,1001), z0 (7031,1002), rho0 (7031,1003): the detector's focal centre
//     F = (-rho0 sin phi0, rho0 cos phi0, z0)
//   dphi (7033,100B), dz (7033,100C), drho (7033,100D): the focal spot (our source) relative
//     to F in the same cylindrical coordinates (flying focal spot; zero without):
//     S = (-(rho0 + drho) sin(phi0 + dphi), (rho0 + drho) cos(phi0 + dphi), z0 + dz)
// Detector (the same in every file):
//   d0 (7031,1031): distance from F to the central element (X, Y) (7031,1033), the element
//   on the line from F through the isocentre. With w0 = (sin phi0, -cos phi0, 0) (from F
//   towards the isocentre) and e0 = (cos phi0, sin phi0, 0), element (row r, column c),
//   0-based, with c* = X - 1, r* = Y - 1, lies at
//     CYLINDRICAL: F + d0 (cos g w0 + sin g e0) + (r - r*) dr z,  g = (c - c*) dc / d0
//     FLAT:        F + d0 w0 + (c - c*) dc e0 + (r - r*) dr z
//   dc = DetectorElementTransverseSpacing (7029,1002), dr = DetectorElementAxialSpacing
//   (7029,1006), both measured at the detector. Our assumption where the dictionary is
//   silent: column index grows counter-clockwise about F seen from +z (along e0) and row
//   index grows along +z. Then phi0 is exactly our view angle theta (docs/geometry.md: the
//   source at -SO r(theta), rays along r(theta) = w0).
//
// Exactness: the flat detector is exact. The cylindrical one is exact when the focal spot
// sits on F's axis (no in-plane flying focal spot; FFSZ is exact). Our cylindrical model is
// an arc about the source, so with an in-plane shift (dphi, drho) the arc is taken about S
// through the same centre pixel with the same arc length per column; seen from the source,
// pixels then move across their rays by about t (1 - cos g) (t the tangential part of
// S - F, g the fan angle): about 0.05 mm for Siemens-sized shifts (1 mm radial, 0.0007
// rad) over a 0.44 rad half-fan, measured in the test, against a 1.3 mm detector pitch.
//
//   TOMO_ASSIGN_OR_RETURN(VectorGeometry g, MakeDicomCtPdGeometry(detector, views));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"

namespace tomo::core {

struct DicomCtPdDetector {
  int64_t rows = 0;     // NumberofDetectorRows (7029,1010)
  int64_t columns = 0;  // NumberofDetectorColumns (7029,1011)
  double row_spacing_mm = 0;     // DetectorElementAxialSpacing (7029,1006)
  double column_spacing_mm = 0;  // DetectorElementTransverseSpacing (7029,1002)
  DetectorShape shape = DetectorShape::kCylindrical;  // DetectorShape (7029,100B)
  double focal_center_to_detector_mm = 0;  // ConstantRadialDistance d0 (7031,1031)
  double central_column = 0;  // DetectorCentralElement X (7031,1033), 1-based
  double central_row = 0;     // DetectorCentralElement Y, 1-based
};

struct DicomCtPdView {
  double focal_center_angle_rad = 0;   // phi0 (7031,1001)
  double focal_center_z_mm = 0;        // z0 (7031,1002)
  double focal_center_radius_mm = 0;   // rho0 (7031,1003)
  double source_angle_shift_rad = 0;   // dphi (7033,100B)
  double source_z_shift_mm = 0;        // dz (7033,100C)
  double source_radius_shift_mm = 0;   // drho (7033,100D)
};

// The exact element centre of the formulas above (for tests and documentation).
Vec3 DicomCtPdElementPosition(const DicomCtPdDetector& detector, const DicomCtPdView& view,
                              double row, double column);
Vec3 DicomCtPdSourcePosition(const DicomCtPdView& view);

// INVALID_ARGUMENT naming the DICOM attribute (and the view) for counts out of
// [1, 65536], spacings or distances not finite and > 0, a detector that does not lie
// beyond the isocentre (d0 <= rho0), non-finite positions; then VectorGeometry::Create's.
absl::StatusOr<VectorGeometry> MakeDicomCtPdGeometry(const DicomCtPdDetector& detector,
                                                     const std::vector<DicomCtPdView>& views);

}  // namespace tomo::core
