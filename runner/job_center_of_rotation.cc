#include "runner/job_center_of_rotation.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/calibration/center_of_rotation.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

constexpr double kPi = 3.14159265358979323846;

std::vector<double> AnglesRad(const pb::Angles& angles) {
  std::vector<double> radians;
  if (angles.has_uniform()) {
    const pb::UniformAngles& u = angles.uniform();
    for (uint32_t i = 0; i < u.count(); ++i) {
      radians.push_back((u.start_deg() + u.span_deg() * i / u.count()) * kPi / 180.0);
    }
  } else {
    for (double d : angles.list().degrees()) radians.push_back(d * kPi / 180.0);
  }
  return radians;
}

// The scan's one-row description from the validated geometry spec.
absl::StatusOr<core::CorScan> ScanOf(const pb::Geometry& g) {
  core::CorScan scan;
  const pb::Angles* angles = nullptr;
  const pb::Detector* detector = nullptr;
  switch (g.kind_case()) {
    case pb::Geometry::kParallel2D:
      scan.columns = g.parallel_2d().num_detectors();
      scan.column_spacing_mm = g.parallel_2d().detector_spacing_mm();
      angles = &g.parallel_2d().angles();
      break;
    case pb::Geometry::kFan2D:
      scan.columns = g.fan_2d().num_detectors();
      scan.column_spacing_mm = g.fan_2d().detector_spacing_mm();
      scan.shape = g.fan_2d().shape() == pb::DETECTOR_SHAPE_CYLINDRICAL
                       ? core::DetectorShape::kCylindrical
                       : core::DetectorShape::kFlat;
      scan.source_origin_mm = g.fan_2d().source_origin_mm();
      scan.origin_detector_mm = g.fan_2d().origin_detector_mm();
      angles = &g.fan_2d().angles();
      break;
    case pb::Geometry::kParallel3D:
      detector = &g.parallel_3d().detector();
      angles = &g.parallel_3d().angles();
      break;
    case pb::Geometry::kCone:
      detector = &g.cone().detector();
      scan.shape = detector->shape() == pb::DETECTOR_SHAPE_CYLINDRICAL
                       ? core::DetectorShape::kCylindrical
                       : core::DetectorShape::kFlat;
      scan.source_origin_mm = g.cone().source_origin_mm();
      scan.origin_detector_mm = g.cone().origin_detector_mm();
      angles = &g.cone().angles();
      break;
    default:
      return absl::InvalidArgumentError(
          "geometry: a centre of rotation estimate needs parallel_2d, fan_2d, parallel_3d or "
          "cone");
  }
  if (detector != nullptr) {
    scan.columns = detector->columns();
    scan.column_spacing_mm = detector->column_spacing_mm();
  }
  scan.angles_rad = AnglesRad(*angles);
  return scan;
}

}  // namespace

absl::StatusOr<std::string> EstimateJobCenterOfRotation(const ValidatedJob& job,
                                                        const JobInput& input,
                                                        core::ReconstructionRequest& request,
                                                        core::Backend& backend,
                                                        const core::RunContext& context) {
  const pb::CenterOfRotationEstimate& asked = *job.center_estimate;
  TOMO_ASSIGN_OR_RETURN(core::CorScan scan, ScanOf(job.geometry_spec));
  if (!input.angles_deg.empty()) {
    scan.angles_rad.clear();
    for (double d : input.angles_deg) scan.angles_rad.push_back(d * kPi / 180.0);
  }
  const core::Dims3& d = input.projections.dims();
  const int64_t row = asked.has_row() ? asked.row() : d.d1 / 2;
  core::Array3D sinogram({d.d0, 1, d.d2});
  for (int64_t v = 0; v < d.d0; ++v) {
    std::memcpy(sinogram.data() + v * d.d2, input.projections.data() + (v * d.d1 + row) * d.d2,
                static_cast<size_t>(d.d2) * sizeof(float));
  }
  core::CorOptions options;
  options.search_radius_columns = asked.search_radius_columns();
  switch (asked.method()) {
    case pb::CENTER_OF_ROTATION_METHOD_OPPOSING_RAYS:
      options.method = core::CorMethod::kOpposingViews;
      break;
    case pb::CENTER_OF_ROTATION_METHOD_SHARPNESS:
      options.method = core::CorMethod::kSharpness;
      break;
    default:
      options.method = core::CorMethod::kAutomatic;
  }
  context.Report({0.0, "centre of rotation", 0, 0});
  TOMO_ASSIGN_OR_RETURN(core::CorEstimate estimate,
                        core::EstimateCenterOfRotation(sinogram, scan, options, backend, context));
  GeometryChanges changes;
  changes.angles_deg = input.angles_deg;
  changes.offset_u_mm =
      core::OffsetForCenterColumn(estimate.column, scan.columns, scan.column_spacing_mm);
  TOMO_ASSIGN_OR_RETURN(request.geometry, GeometryWith(job, changes));
  return absl::StrCat(estimate.Summary(scan.columns, scan.column_spacing_mm), " from row ", row);
}

}  // namespace tomo::server
