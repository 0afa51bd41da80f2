#include "core/io/dicom_ct_pd_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdatset.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"

namespace tomo::core {
namespace {

constexpr double kMaxStored = 65535.0;

absl::Status Check(const OFCondition& condition, const std::string& path, const char* what) {
  if (condition.good()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cannot write ", path, ": ", what, " (DCMTK: ", condition.text(), ")"));
}

std::string Decimal(double value) { return absl::StrFormat("%.10g", value); }

}  // namespace

absl::Status WriteDicomCtPdFile(const std::string& path, const DicomCtPdScan& scan, int64_t view,
                                const float* line_integrals) {
  if (view < 0 || view >= static_cast<int64_t>(scan.views.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("view ", view, " is out of range [0, ", scan.views.size(), ")"));
  }
  if (scan.write_intensities && !(scan.incident_photons > 0)) {
    return absl::InvalidArgumentError(
        "incident_photons: write_intensities needs a value > 0 (the I0 of -ln(I / I0))");
  }
  const DicomCtPdDetector& d = scan.detector;
  const DicomCtPdView& v = scan.views[static_cast<size_t>(view)];
  const int64_t count = d.rows * d.columns;
  // The stored quantity, per pixel in the file's layout: one image row per channel.
  std::vector<double> values(static_cast<size_t>(count));
  for (int64_t r = 0; r < d.rows; ++r) {
    for (int64_t c = 0; c < d.columns; ++c) {
      const double p = line_integrals[r * d.columns + c];
      if (!std::isfinite(p)) {
        return absl::InvalidArgumentError(
            absl::StrCat("view ", view, ": line integral at (row ", r, ", column ", c, ") is ",
                         p, "; values must be finite"));
      }
      values[static_cast<size_t>(c * d.rows + r)] =
          scan.write_intensities ? scan.incident_photons * std::exp(-p) : p;
    }
  }
  const auto [low_it, high_it] = std::minmax_element(values.begin(), values.end());
  const double intercept = std::min(0.0, *low_it);
  const double range = *high_it - intercept;
  const double slope = range > 0 ? range / kMaxStored : 1.0;
  std::vector<Uint16> stored(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    stored[i] = static_cast<Uint16>(
        std::clamp(std::lround((values[i] - intercept) / slope), 0L, static_cast<long>(kMaxStored)));
  }

  DcmFileFormat file;
  DcmDataset* data = file.getDataset();
  char uid[100];
  const auto put_string = [&](const DcmTagKey& key, const std::string& value) {
    return Check(data->putAndInsertString(key, value.c_str()), path, "string attribute");
  };
  TOMO_RETURN_IF_ERROR(put_string(DCM_SOPClassUID, UID_CTImageStorage));
  TOMO_RETURN_IF_ERROR(
      put_string(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid, SITE_INSTANCE_UID_ROOT)));
  TOMO_RETURN_IF_ERROR(put_string(DCM_Modality, "CT"));
  TOMO_RETURN_IF_ERROR(put_string(DCM_ImageType, "ORIGINAL\\PRIMARY\\AXIAL"));
  TOMO_RETURN_IF_ERROR(put_string(DCM_Manufacturer, "tomoserve phantom"));
  TOMO_RETURN_IF_ERROR(put_string(DCM_InstanceNumber, std::to_string(view + 1)));
  for (const DicomAttribute& a : scan.patient_study) {
    TOMO_RETURN_IF_ERROR(put_string(DcmTagKey(a.group, a.element), a.value));
  }
  TOMO_RETURN_IF_ERROR(Check(data->putAndInsertUint16(DCM_SamplesPerPixel, 1), path, "image"));
  TOMO_RETURN_IF_ERROR(put_string(DCM_PhotometricInterpretation, "MONOCHROME2"));
  TOMO_RETURN_IF_ERROR(Check(
      data->putAndInsertUint16(DCM_Rows, static_cast<Uint16>(d.columns)), path, "Rows"));
  TOMO_RETURN_IF_ERROR(Check(
      data->putAndInsertUint16(DCM_Columns, static_cast<Uint16>(d.rows)), path, "Columns"));
  TOMO_RETURN_IF_ERROR(Check(data->putAndInsertUint16(DCM_BitsAllocated, 16), path, "image"));
  TOMO_RETURN_IF_ERROR(Check(data->putAndInsertUint16(DCM_BitsStored, 16), path, "image"));
  TOMO_RETURN_IF_ERROR(Check(data->putAndInsertUint16(DCM_HighBit, 15), path, "image"));
  TOMO_RETURN_IF_ERROR(Check(data->putAndInsertUint16(DCM_PixelRepresentation, 0), path, "image"));
  TOMO_RETURN_IF_ERROR(put_string(DCM_RescaleSlope, Decimal(slope)));
  TOMO_RETURN_IF_ERROR(put_string(DCM_RescaleIntercept, Decimal(intercept)));

  // Private creators of each block, then the private elements with their dictionary VRs.
  const std::pair<uint16_t, const char*> creators[] = {
      {0x7029, "DetectorSystemArrangementModule"}, {0x7031, "DetectorDynamicsModule"},
      {0x7033, "SourceDynamicsModule"},            {0x7037, "ProjectionDataDefinitions"},
      {0x7039, "PreprocessingFlagsModule"},        {0x7041, "WaterAttenuationModule"}};
  for (const auto& [group, creator] : creators) {
    if (group == 0x7041 && !(scan.water_attenuation_per_mm > 0)) continue;
    TOMO_RETURN_IF_ERROR(Check(
        data->putAndInsertString(DcmTag(group, 0x0010, EVR_LO), creator), path, "creator"));
  }
  const auto put_us = [&](uint16_t g, uint16_t e, int64_t value) {
    return Check(data->putAndInsertUint16(DcmTag(g, e, EVR_US), static_cast<Uint16>(value)),
                 path, "private US");
  };
  const auto put_fl = [&](uint16_t g, uint16_t e, double value) {
    return Check(data->putAndInsertFloat32(DcmTag(g, e, EVR_FL), static_cast<Float32>(value)),
                 path, "private FL");
  };
  const auto put_cs = [&](uint16_t g, uint16_t e, const std::string& value) {
    return Check(data->putAndInsertString(DcmTag(g, e, EVR_CS), value.c_str()), path,
                 "private CS");
  };
  TOMO_RETURN_IF_ERROR(put_us(0x7029, 0x1010, d.rows));
  TOMO_RETURN_IF_ERROR(put_us(0x7029, 0x1011, d.columns));
  TOMO_RETURN_IF_ERROR(put_fl(0x7029, 0x1002, d.column_spacing_mm));
  TOMO_RETURN_IF_ERROR(put_fl(0x7029, 0x1006, d.row_spacing_mm));
  TOMO_RETURN_IF_ERROR(
      put_cs(0x7029, 0x100B, d.shape == DetectorShape::kFlat ? "FLAT" : "CYLINDRICAL"));
  TOMO_RETURN_IF_ERROR(put_fl(0x7031, 0x1001, v.focal_center_angle_rad));
  TOMO_RETURN_IF_ERROR(put_fl(0x7031, 0x1002, v.focal_center_z_mm));
  TOMO_RETURN_IF_ERROR(put_fl(0x7031, 0x1003, v.focal_center_radius_mm));
  TOMO_RETURN_IF_ERROR(put_fl(0x7031, 0x1031, d.focal_center_to_detector_mm));
  const Float32 central[2] = {static_cast<Float32>(d.central_column),
                              static_cast<Float32>(d.central_row)};
  TOMO_RETURN_IF_ERROR(Check(
      data->putAndInsertFloat32Array(DcmTag(0x7031, 0x1033, EVR_FL), central, 2), path,
      "DetectorCentralElement"));
  TOMO_RETURN_IF_ERROR(put_fl(0x7033, 0x100B, v.source_angle_shift_rad));
  TOMO_RETURN_IF_ERROR(put_fl(0x7033, 0x100C, v.source_z_shift_mm));
  TOMO_RETURN_IF_ERROR(put_fl(0x7033, 0x100D, v.source_radius_shift_mm));
  TOMO_RETURN_IF_ERROR(put_cs(0x7033, 0x100E, scan.flying_focal_spot_mode));
  if (scan.incident_photons > 0) {
    const std::vector<Float32> photons(static_cast<size_t>(d.columns),
                                       static_cast<Float32>(scan.incident_photons));
    TOMO_RETURN_IF_ERROR(Check(data->putAndInsertFloat32Array(DcmTag(0x7033, 0x1065, EVR_FL),
                                                              photons.data(), photons.size()),
                               path, "PhotonStatistics"));
  }
  TOMO_RETURN_IF_ERROR(put_cs(0x7037, 0x1009, scan.helical ? "HELICAL" : "AXIAL"));
  TOMO_RETURN_IF_ERROR(put_cs(0x7037, 0x100A, "FANBEAM"));
  TOMO_RETURN_IF_ERROR(put_cs(0x7039, 0x1009, scan.write_intensities ? "NO" : "YES"));
  if (scan.water_attenuation_per_mm > 0) {
    TOMO_RETURN_IF_ERROR(Check(
        data->putAndInsertString(DcmTag(0x7041, 0x1001, EVR_DS),
                                 Decimal(scan.water_attenuation_per_mm).c_str()),
        path, "WaterAttenuationCoefficient"));
  }
  TOMO_RETURN_IF_ERROR(Check(
      data->putAndInsertUint16Array(DCM_PixelData, stored.data(), stored.size()), path,
      "PixelData"));
  const E_TransferSyntax xfer =
      scan.implicit_vr ? EXS_LittleEndianImplicit : EXS_LittleEndianExplicit;
  return Check(file.saveFile(path.c_str(), xfer), path, "saveFile");
}

absl::StatusOr<std::vector<std::string>> WriteDicomCtPdPhantomScan(
    const std::string& directory, const DicomCtPdScan& scan, const EllipsoidPhantom& phantom,
    int supersampling) {
  TOMO_ASSIGN_OR_RETURN(VectorGeometry geometry, MakeDicomCtPdGeometry(scan.detector, scan.views));
  const Array3D projections = phantom.Project(geometry, supersampling);
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", directory, ": ", error.message()));
  }
  std::vector<std::string> paths;
  const int64_t per_view = scan.detector.rows * scan.detector.columns;
  for (int64_t i = 0; i < geometry.num_views(); ++i) {
    const std::string path =
        (std::filesystem::path(directory) / absl::StrFormat("proj_%06d.dcm", i)).string();
    TOMO_RETURN_IF_ERROR(WriteDicomCtPdFile(path, scan, i, projections.data() + i * per_view));
    paths.push_back(path);
  }
  return paths;
}

}  // namespace tomo::core
