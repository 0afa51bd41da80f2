#include "client/cli/phantom_cases.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"

namespace tomo::cli {
namespace {

namespace v1 = ::tomoserve::v1;

constexpr int64_t kMaxSize = 4096;
constexpr int kSupersampling2D = 4;
// 3D rasterising and projecting cost supersampling^3 and ^2 per voxel and pixel; 2 keeps a
// 256^3 case to seconds while its error stays far below the reconstructions'.
constexpr int kSupersampling3D = 2;

}  // namespace

int64_t CoveringCount(double half_width, double spacing) {
  return static_cast<int64_t>(std::ceil(2.0 * half_width / spacing)) + 4;
}

SeeingDetector DetectorSeeingTheGrid(double side_mm, double voxel_mm, double source_origin_mm,
                                     double origin_detector_mm) {
  const double distance = source_origin_mm + origin_detector_mm;
  const double field_radius = std::sqrt(0.5) * side_mm;
  return {voxel_mm * distance / source_origin_mm,
          distance * std::tan(std::asin(field_radius / source_origin_mm)),
          0.5 * side_mm * distance / (source_origin_mm - field_radius)};
}

namespace {

v1::Volume VolumeProto(int64_t size_xy, int64_t size_z, double voxel_mm) {
  v1::Volume volume;
  volume.mutable_size()->set_x(static_cast<uint32_t>(size_xy));
  volume.mutable_size()->set_y(static_cast<uint32_t>(size_xy));
  volume.mutable_size()->set_z(static_cast<uint32_t>(size_z));
  volume.mutable_voxel_size_mm()->set_x(voxel_mm);
  volume.mutable_voxel_size_mm()->set_y(voxel_mm);
  volume.mutable_voxel_size_mm()->set_z(voxel_mm);
  volume.mutable_center_mm();  // (0, 0, 0), present so that the JSON file shows it
  return volume;
}

void SetUniformAngles(v1::Angles* angles, int64_t views, double span_deg) {
  v1::UniformAngles* uniform = angles->mutable_uniform();
  uniform->set_count(static_cast<uint32_t>(views));
  uniform->set_start_deg(0.0);
  uniform->set_span_deg(span_deg);
}

absl::StatusOr<PhantomCase> Parallel2DCase(const PhantomCaseOptions& o) {
  const double radius_mm = static_cast<double>(o.size) * o.voxel_size_mm / 2.0;
  // The grid's diagonal, plus two spare elements on each side.
  const int64_t detectors =
      o.detectors > 0 ? o.detectors : CoveringCount(std::sqrt(2.0) * radius_mm, o.voxel_size_mm);
  TOMO_ASSIGN_OR_RETURN(core::ParallelGeometry2D geometry,
                        core::ParallelGeometry2D::Create(
                            detectors, o.voxel_size_mm, 0.0,
                            core::ParallelGeometry2D::UniformAngles(o.views, 0.0, M_PI)));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({o.size, o.size, 1},
                                                     {o.voxel_size_mm, o.voxel_size_mm,
                                                      o.voxel_size_mm},
                                                     {}));
  const core::EllipsePhantom phantom = core::EllipsePhantom::ModifiedSheppLogan(radius_mm);
  PhantomCase result;
  v1::ParallelBeam2D* parallel = result.geometry.mutable_parallel_2d();
  parallel->set_num_detectors(static_cast<uint32_t>(detectors));
  parallel->set_detector_spacing_mm(o.voxel_size_mm);
  parallel->set_detector_offset_mm(0.0);
  SetUniformAngles(parallel->mutable_angles(), o.views, 180.0);
  result.volume = VolumeProto(o.size, 1, o.voxel_size_mm);
  if (o.with_projections) {
    result.projections = phantom.ParallelProjections(geometry, kSupersampling2D);
    result.truth = phantom.Rasterize(volume, kSupersampling2D);
  }
  result.description = absl::StrFormat("shepp-logan %dx%d, %d views", o.size, o.size, o.views);
  return result;
}

absl::StatusOr<PhantomCase> Fan2DCase(const PhantomCaseOptions& o) {
  const double side_mm = static_cast<double>(o.size) * o.voxel_size_mm;
  core::FanConeOptions fan;
  fan.source_origin_mm = 2.0 * side_mm;
  fan.origin_detector_mm = side_mm;
  const SeeingDetector seeing = DetectorSeeingTheGrid(side_mm, o.voxel_size_mm,
                                                      fan.source_origin_mm, fan.origin_detector_mm);
  const double spacing = seeing.spacing_mm;
  const int64_t columns =
      o.detectors > 0 ? o.detectors : CoveringCount(seeing.half_width_mm, spacing);
  fan.detector = {1, columns, o.voxel_size_mm, spacing, 0.0, 0.0};
  fan.angles_rad = core::UniformAnglesRad(o.views, 0.0, 2.0 * M_PI);
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry geometry, core::MakeFan2D(fan));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({o.size, o.size, 1},
                                                     {o.voxel_size_mm, o.voxel_size_mm,
                                                      o.voxel_size_mm},
                                                     {}));
  const core::EllipsePhantom flat = core::EllipsePhantom::ModifiedSheppLogan(side_mm / 2.0);
  PhantomCase result;
  v1::FanBeam2D* proto = result.geometry.mutable_fan_2d();
  proto->set_num_detectors(static_cast<uint32_t>(columns));
  proto->set_detector_spacing_mm(spacing);
  proto->set_detector_offset_mm(0.0);
  proto->set_shape(v1::DETECTOR_SHAPE_FLAT);
  proto->set_source_origin_mm(fan.source_origin_mm);
  proto->set_origin_detector_mm(fan.origin_detector_mm);
  SetUniformAngles(proto->mutable_angles(), o.views, 360.0);
  result.volume = VolumeProto(o.size, 1, o.voxel_size_mm);
  if (o.with_projections) {
    result.projections =
        core::EllipsoidPhantom::ExtrudedFrom(flat).Project(geometry, kSupersampling2D);
    result.truth = flat.Rasterize(volume, kSupersampling2D);
  }
  result.description =
      absl::StrFormat("shepp-logan fan beam %dx%d, %d views", o.size, o.size, o.views);
  return result;
}

absl::StatusOr<PhantomCase> ConeCase(const PhantomCaseOptions& o) {
  const double side_mm = static_cast<double>(o.size) * o.voxel_size_mm;
  core::FanConeOptions cone;
  cone.source_origin_mm = 3.0 * side_mm;
  cone.origin_detector_mm = side_mm;
  const SeeingDetector seeing = DetectorSeeingTheGrid(
      side_mm, o.voxel_size_mm, cone.source_origin_mm, cone.origin_detector_mm);
  const double spacing = seeing.spacing_mm;
  const int64_t columns =
      o.detectors > 0 ? o.detectors : CoveringCount(seeing.half_width_mm, spacing);
  const int64_t rows = CoveringCount(seeing.half_height_mm, spacing);
  cone.detector = {rows, columns, spacing, spacing, 0.0, 0.0};
  cone.angles_rad = core::UniformAnglesRad(o.views, 0.0, 2.0 * M_PI);
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry geometry, core::MakeCircularCone(cone));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({o.size, o.size, o.size},
                                                     {o.voxel_size_mm, o.voxel_size_mm,
                                                      o.voxel_size_mm},
                                                     {}));
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(side_mm / 2.0);
  PhantomCase result;
  v1::ConeBeam* proto = result.geometry.mutable_cone();
  v1::Detector* detector = proto->mutable_detector();
  detector->set_rows(static_cast<uint32_t>(rows));
  detector->set_columns(static_cast<uint32_t>(columns));
  detector->set_row_spacing_mm(spacing);
  detector->set_column_spacing_mm(spacing);
  detector->set_shape(v1::DETECTOR_SHAPE_FLAT);
  proto->set_source_origin_mm(cone.source_origin_mm);
  proto->set_origin_detector_mm(cone.origin_detector_mm);
  SetUniformAngles(proto->mutable_angles(), o.views, 360.0);
  result.volume = VolumeProto(o.size, o.size, o.voxel_size_mm);
  if (o.with_projections) {
    result.projections = phantom.Project(geometry, kSupersampling3D);
    result.truth = phantom.Rasterize(volume, kSupersampling3D);
  }
  result.description = absl::StrFormat("shepp-logan 3D cone beam %d^3, %d views of %dx%d",
                                       o.size, o.views, rows, columns);
  return result;
}

absl::StatusOr<PhantomCase> Radon3DCase(const PhantomCaseOptions& o) {
  const double side_mm = static_cast<double>(o.size) * o.voxel_size_mm;
  // Samples one voxel apart over the grid's circumscribed sphere, plus two on each side.
  const double spacing = o.voxel_size_mm;
  const int64_t samples = CoveringCount(std::sqrt(0.75) * side_mm, spacing);
  TOMO_ASSIGN_OR_RETURN(core::RadonGeometry geometry,
                        core::MakeUniformSolidAngleRadon(o.views, samples, spacing));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({o.size, o.size, o.size},
                                                     {o.voxel_size_mm, o.voxel_size_mm,
                                                      o.voxel_size_mm},
                                                     {}));
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(side_mm / 2.0);
  PhantomCase result;
  v1::Radon3D* proto = result.geometry.mutable_radon_3d();
  proto->mutable_uniform_solid_angle()->set_count(static_cast<uint32_t>(o.views));
  proto->set_num_samples(static_cast<uint32_t>(samples));
  proto->set_sample_spacing_mm(spacing);
  result.volume = VolumeProto(o.size, o.size, o.voxel_size_mm);
  // Each sample the mean plane integral over its interval, as a detector bin would give.
  if (o.with_projections) {
    result.projections = core::EllipsoidRadonTransform(phantom, geometry, kSupersampling3D);
    result.truth = phantom.Rasterize(volume, kSupersampling3D);
  }
  result.description = absl::StrFormat(
      "shepp-logan 3D Radon transform %d^3, %d directions (uniform solid angle) of %d samples",
      o.size, o.views, samples);
  return result;
}

}  // namespace

absl::StatusOr<PhantomCase> MakePhantomCase(const PhantomCaseOptions& options) {
  if (options.size < 2 || options.size > kMaxSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--size: ", options.size, " is out of range [2, ", kMaxSize, "]"));
  }
  if (options.views < 1 || options.views > core::VectorGeometry::kMaxViews) {
    return absl::InvalidArgumentError(absl::StrCat("--views: ", options.views,
                                                   " is out of range [1, ",
                                                   core::VectorGeometry::kMaxViews, "]"));
  }
  if (options.detectors < 0 || options.detectors > core::VectorGeometry::kMaxDetectorSide) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--detectors: ", options.detectors, " is out of range [0, ",
        core::VectorGeometry::kMaxDetectorSide, "] (0: enough to see the whole grid)"));
  }
  if (!std::isfinite(options.voxel_size_mm) || options.voxel_size_mm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--voxel-size: ", options.voxel_size_mm, " must be a finite value > 0"));
  }
  switch (options.geometry) {
    case PhantomGeometry::kParallel2D:
      return Parallel2DCase(options);
    case PhantomGeometry::kFan2D:
      return Fan2DCase(options);
    case PhantomGeometry::kCone:
      return ConeCase(options);
    case PhantomGeometry::kRadon3D:
      return Radon3DCase(options);
  }
  return absl::InvalidArgumentError("geometry: unknown phantom geometry");
}

}  // namespace tomo::cli
