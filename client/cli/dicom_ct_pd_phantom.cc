#include "client/cli/dicom_ct_pd_phantom.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/job_spec_json.h"
#include "core/base/status_macros.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/dicom_ct_pd_writer.h"
#include "core/io/raw_io.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

absl::StatusOr<std::vector<std::string>> WriteDicomCtPdPhantom(const std::string& out_dir,
                                                               int64_t size, int64_t views,
                                                               double voxel_size_mm) {
  if (size < 8 || size > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--size: ", size, " is out of range [8, 1024]"));
  }
  if (views < 1 || views > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--views: ", views, " is out of range [1, 100000]"));
  }
  if (!(voxel_size_mm > 0) || !std::isfinite(voxel_size_mm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--voxel-size: ", voxel_size_mm, " must be a finite value > 0"));
  }
  constexpr double kPi = 3.14159265358979323846;
  const double side_mm = static_cast<double>(size) * voxel_size_mm;
  const double rho0 = 3.0 * side_mm, d0 = 4.0 * side_mm;
  core::DicomCtPdScan scan;
  // The grid's circumscribed circle (radius side / sqrt 2) seen from the source, with a
  // margin: the fan's half angle asin(r / rho0), as an arc length at d0.
  const double half_fan = std::asin(0.75 * side_mm / rho0);
  const double pitch_mm = voxel_size_mm * d0 / rho0;  // one voxel at the axis
  scan.detector.columns = 2 * static_cast<int64_t>(std::ceil(half_fan * d0 / pitch_mm));
  scan.detector.rows = static_cast<int64_t>(std::ceil(1.2 * side_mm * d0 / (rho0 - side_mm / 2) /
                                                      pitch_mm));
  scan.detector.column_spacing_mm = pitch_mm;
  scan.detector.row_spacing_mm = pitch_mm;
  scan.detector.shape = core::DetectorShape::kCylindrical;
  scan.detector.focal_center_to_detector_mm = d0;
  scan.detector.central_column = (scan.detector.columns + 1) / 2.0;
  scan.detector.central_row = (scan.detector.rows + 1) / 2.0;
  for (int64_t i = 0; i < views; ++i) {
    core::DicomCtPdView view;
    view.focal_center_angle_rad = 2 * kPi * static_cast<double>(i) / static_cast<double>(views);
    view.focal_center_radius_mm = rho0;
    scan.views.push_back(view);
  }
  scan.incident_photons = 1e5;
  scan.patient_study = {{0x0010, 0x0010, "Shepp^Logan"}, {0x0010, 0x0020, "TOMO-PHANTOM"}};
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(side_mm / 2.0);
  const std::filesystem::path dir(out_dir);
  const std::string scan_dir = (dir / "scan").string();
  TOMO_RETURN_IF_ERROR(core::WriteDicomCtPdPhantomScan(scan_dir, scan, phantom, 2).status());

  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({size, size, size},
                                                     {voxel_size_mm, voxel_size_mm, voxel_size_mm},
                                                     {}));
  const std::string truth_path = (dir / "truth.raw").string();
  TOMO_RETURN_IF_ERROR(core::WriteRawFloat32(truth_path, phantom.Rasterize(volume, 2)));

  tomoserve::v1::JobSpec spec;
  spec.set_name(absl::StrCat("dicom-ct-pd ", size, "^3, ", views, " views"));
  spec.mutable_geometry()->mutable_from_input_files();
  auto* v = spec.mutable_volume();
  v->mutable_size()->set_x(static_cast<uint32_t>(size));
  v->mutable_size()->set_y(static_cast<uint32_t>(size));
  v->mutable_size()->set_z(static_cast<uint32_t>(size));
  v->mutable_voxel_size_mm()->set_x(voxel_size_mm);
  v->mutable_voxel_size_mm()->set_y(voxel_size_mm);
  v->mutable_voxel_size_mm()->set_z(voxel_size_mm);
  spec.mutable_input()->set_encoding(tomoserve::v1::DATA_ENCODING_DICOM_CT_PD);
  spec.mutable_algorithm()->mutable_fbp();
  spec.add_outputs(tomoserve::v1::OUTPUT_FORMAT_RAW_FLOAT32);
  const std::string spec_path = (dir / "job.json").string();
  TOMO_RETURN_IF_ERROR(client::WriteJobSpecFile(spec_path, spec));
  return std::vector<std::string>{scan_dir, spec_path, truth_path};
}

}  // namespace tomo::cli
