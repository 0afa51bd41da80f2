// Reads DICOM-CT-PD projection files (one DICOM file per projection, the format of the
// TCIA/Mayo LDCT-and-Projection-data library) with DCMTK into what a reconstruction needs:
// the projections as line integrals (views, rows, columns), one vector-geometry view per
// file (dicom_ct_pd_geometry.h has the frame and the formulas), the photon statistics per
// view, and the AcquisitionMetadata (patient/study attributes, water attenuation).
//
// Per file (tags of the DICOM-CT-PD dictionary, Moen et al. Med Phys 2021 Table IV; the VRs
// as the public DCMTK readers register them: FL for the geometry, US for counts, CS for
// flags and DS for the water attenuation):
//   required: NumberofDetectorRows (7029,1010), NumberofDetectorColumns (7029,1011),
//     DetectorElementTransverseSpacing (7029,1002), DetectorElementAxialSpacing (7029,1006),
//     DetectorShape (7029,100B) "CYLINDRICAL" | "FLAT" (SPHERICAL is refused),
//     DetectorFocalCenterAngularPosition/AxialPosition/RadialDistance (7031,1001..1003),
//     ConstantRadialDistance (7031,1031), DetectorCentralElement (7031,1033),
//     Rows (0028,0010) = detector columns and Columns (0028,0011) = detector rows (each
//     DICOM image row is one detector channel), BitsAllocated 16, PixelRepresentation 0,
//     PixelData (7FE0,0010) uncompressed.
//   optional: SourceAngularPositionShift/AxialPositionShift/RadialDistanceShift
//     (7033,100B..100D) (0 when absent), FlyingFocalSpotMode (7033,100E), PhotonStatistics
//     (7033,1065, FL 1-n), LogFlag (7039,1009), WaterAttenuationCoefficient (7041,1001, per
//     mm), RescaleSlope/Intercept (0028,1053)/(0028,1052) (1 and 0 when absent).
// Private elements are read by tag whatever their VR in the file: typed (FL, FD, DS, US, CS)
// or untyped (UN/OB, as an implicit-VR file without our dictionary gives them; the bytes
// are then little-endian FL or US as the dictionary says).
//
// Values: pixel = RescaleSlope x stored + RescaleIntercept. LogFlag absent or one of
// YES/Y/TRUE/1/LOG: the values are line integrals already (the public data are). LogFlag
// NO/N/FALSE/0: they are detected intensities, turned into p = -ln(I / I0) with I0 the
// PhotonStatistics of the view (per column when it has one value per column, else its
// first value); without PhotonStatistics that is INVALID_ARGUMENT. Intensities <= 0 take
// the guard of projection_preprocessing.h (transmission clamped to 1e-6).
//
// Photon statistics become per-view weights for statistical methods: photon_statistics is
// (views, 1, n) with the n values of each file, empty (0 views) when no file has them.
// A file that has them while another does not, or a different n, is INVALID_ARGUMENT.
//
// Errors: INVALID_ARGUMENT naming the file and the tag, e.g.
//   "proj_0007.dcm: DetectorFocalCenterAngularPosition (7031,1001) missing"
//   "proj_0003.dcm: NumberofDetectorRows (7029,1010) 32 differs from 64 in proj_0000.dcm"
//   "p.dcm: TransferSyntaxUID (0002,0010) 1.2.840.10008.1.2.4.50 (JPEG Baseline) is not
//    supported; expected uncompressed little endian"
//   "p.dcm: not a readable DICOM file (DCMTK: Premature end of stream)"
//
//   TOMO_ASSIGN_OR_RETURN(DicomCtPdAcquisition scan, ReadDicomCtPdFiles(paths));
//   // scan.geometry, scan.projections, scan.photon_statistics, scan.metadata
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/io/acquisition_metadata.h"
#include "core/io/dicom_ct_pd_geometry.h"

namespace tomo::core {

struct DicomCtPdAcquisition {
  VectorGeometry geometry;
  Array3D projections;        // (views, rows, columns) line integrals
  Array3D photon_statistics;  // (views, 1, n) or empty
  AcquisitionMetadata metadata;
  std::string flying_focal_spot_mode;  // as in the first file ("FFSNONE", ...), may be empty
};

// What the header of one file says, without decoding its pixels (the Submit-time check).
struct DicomCtPdHeader {
  DicomCtPdDetector detector;
  DicomCtPdView view;
};

// One file in memory, named for messages.
struct DicomBytes {
  std::string name;
  const void* bytes = nullptr;
  size_t size_bytes = 0;
};

// Parses one file up to its pixel data and checks every required tag and the transfer
// syntax (cheap: no pixel is decoded). For tomod's Submit-time check and the fuzz target.
absl::StatusOr<DicomCtPdHeader> ParseDicomCtPdHeader(const void* bytes, size_t size_bytes,
                                                     absl::string_view name);

// INVALID_ARGUMENT naming `name` and the attribute when detector (counts, spacings, shape,
// d0, central element) differs from `first` (read from first_name): every file of a scan
// must describe the same detector.
absl::Status CheckSameDicomCtPdDetector(const DicomCtPdDetector& detector,
                                       absl::string_view name, const DicomCtPdDetector& first,
                                       absl::string_view first_name);

// Every file one view, in the order given (a client lists a directory sorted by name).
// INVALID_ARGUMENT for an empty list, a file as above, or a detector (counts, spacings,
// shape, d0, central element) that differs from the first file's.
absl::StatusOr<DicomCtPdAcquisition> DecodeDicomCtPd(const std::vector<DicomBytes>& files);

// The same from paths (NOT_FOUND for a path that cannot be opened).
absl::StatusOr<DicomCtPdAcquisition> ReadDicomCtPdFiles(const std::vector<std::string>& paths);

}  // namespace tomo::core
