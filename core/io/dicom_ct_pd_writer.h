// Writes DICOM-CT-PD projection files (one file per view) from line integrals, above all
// from the analytic phantom: there is no public DICOM-CT-PD sample in this repository, so
// the reader is validated by reading back what this writes (tests/core/io/
// dicom_ct_pd_reader_test.cc), and `tomo` can make demo scans. The tags, the frame and the
// pixel layout are those of dicom_ct_pd_reader.h and dicom_ct_pd_geometry.h.
//
// Pixel values are uint16 with a per-file RescaleSlope/RescaleIntercept chosen from the
// file's range (slope = (max - min) / 65535), so the values read back differ from the
// written ones by at most slope / 2. With write_intensities the files hold detected
// intensities I = I0 exp(-p) with LogFlag (7039,1009) "NO" and PhotonStatistics I0 for
// every column (the reader then takes -ln(I / I0)); else line integrals with LogFlag "YES".
// Files are written explicit-VR little endian, or implicit VR (private elements then read
// back as UN, which the reader must handle) when implicit_vr is set.
//
//   DicomCtPdScan scan;  // detector, views (one DicomCtPdView per file), ...
//   TOMO_ASSIGN_OR_RETURN(std::vector<std::string> paths,
//                         WriteDicomCtPdPhantomScan("/tmp/scan", scan, phantom, 2));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/io/acquisition_metadata.h"
#include "core/io/dicom_ct_pd_geometry.h"
#include "core/phantom/ellipsoid_phantom.h"

namespace tomo::core {

struct DicomCtPdScan {
  DicomCtPdDetector detector;
  std::vector<DicomCtPdView> views;
  std::string flying_focal_spot_mode = "FFSNONE";  // FlyingFocalSpotMode (7033,100E)
  bool helical = false;  // TypeofProjectionData (7037,1009) HELICAL or AXIAL
  // WaterAttenuationCoefficient (7041,1001), per mm; 0: not written.
  double water_attenuation_per_mm = 0.0192;
  std::vector<DicomAttribute> patient_study;  // written into every file
  double incident_photons = 0;  // PhotonStatistics (7033,1065) per column; 0: not written
  bool write_intensities = false;  // needs incident_photons > 0
  bool implicit_vr = false;
};

// Writes view `view` of scan (rows x columns line integrals, row-major) to path.
// INVALID_ARGUMENT for a view out of range or non-finite values; INTERNAL naming the path
// when DCMTK cannot write it.
absl::Status WriteDicomCtPdFile(const std::string& path, const DicomCtPdScan& scan, int64_t view,
                                const float* line_integrals);

// Projects the phantom through the scan's geometry (MakeDicomCtPdGeometry, supersampling^2
// exact line integrals per pixel) and writes directory/proj_NNNNNN.dcm, one per view.
// Returns the paths in view order.
absl::StatusOr<std::vector<std::string>> WriteDicomCtPdPhantomScan(
    const std::string& directory, const DicomCtPdScan& scan, const EllipsoidPhantom& phantom,
    int supersampling);

}  // namespace tomo::core
