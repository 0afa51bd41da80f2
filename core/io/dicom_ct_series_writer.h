// DICOM CT Image Storage series (DCMTK): one file per axial slice, the output that PACS,
// clinical viewers and every DICOM tool open. Each file passes dciodvfy (dicom3tools)
// without errors and reads in pydicom (tests/core/io/dicom_ct_series_writer_test.cc).
//
// What goes in each file (Explicit VR Little Endian, SOP class CT Image Storage):
// - UIDs from DCMTK's generator: one Study (or the input's StudyInstanceUID), one Series and
//   one Frame of Reference for the whole series, a fresh SOP Instance UID per slice.
// - Geometry in the patient frame of core/io/patient_frame.h (LPS): Image Orientation
//   (Patient) 1\0\0\0\1\0 (columns along the object's +x, rows from +y down to -y), Image
//   Position (Patient) of the slice's first pixel, Pixel Spacing (row\column = dy\dx), Slice
//   Thickness dz, Slice Location (the LPS z). File k holds volume slice z = k (Instance
//   Number k + 1), its rows in reverse y order so that anterior is at the top.
// - Pixels: signed 16-bit stored values SV with HU = SV x RescaleSlope + RescaleIntercept
//   and HU = 1000 (mu - mu_water) / mu_water, mu the volume's value (1/mm). Slope 1 and
//   intercept 0 while the volume's HU fit in int16 (the usual 1-HU steps); otherwise the one
//   slope and intercept for the whole series that map its HU range onto int16 (no value
//   is clipped). Window Center/Width (0028,1050/1051) from the given window (volume units)
//   or the robust window of core/io/display_window.h, converted to HU.
// - Patient and study attributes: those of AcquisitionMetadata::patient_study among
//   PatientName, PatientID, PatientBirthDate, PatientSex, StudyInstanceUID, StudyDate,
//   StudyTime, StudyID, AccessionNumber, ReferringPhysicianName, StudyDescription (any other
//   tag there is ignored: the writer owns the image, series and geometry attributes). Absent
//   ones get placeholders: PatientName "Anonymous^Patient", PatientID "TOMO-" and 8 hex digits of
//   the study UID, StudyID "1", the current date and time, empty type-2 values otherwise.
//   SpecificCharacterSet ISO_IR 192 (UTF-8) when a copied value is not plain ASCII.
//
//   DicomCtSeriesOptions options;
//   options.water_attenuation_per_mm = 0.0192;
//   TOMO_ASSIGN_OR_RETURN(std::vector<std::string> names,
//       WriteDicomCtSeries("/results/dicom", volume, geometry, metadata, options));
//
// Errors: INVALID_ARGUMENT when the water attenuation is not a finite value > 0, a window is
// empty, the volume has NaN/Inf values (naming the first) or dims other than the geometry's;
// FAILED_PRECONDITION when DCMTK's data dictionary is not loaded (DCMDICTPATH); INTERNAL
// naming the file and DCMTK's message when a file cannot be written. The directory must
// exist. Thread-safe (DCMTK's UID generator is).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/acquisition_metadata.h"
#include "core/io/display_window.h"

namespace tomo::core {

struct DicomCtSeriesOptions {
  double water_attenuation_per_mm = 0;  // required, > 0
  std::optional<DisplayWindow> window;  // in the volume's units; unset: robust window
  std::string series_description = "tomoserve reconstruction";
  int series_number = 1;
};

// The stored-value scale of a series: HU = stored x slope + intercept.
struct HounsfieldRescale {
  double slope = 1;
  double intercept = 0;
};
// The rescale described above for HU values in [min_hu, max_hu].
HounsfieldRescale ChooseHounsfieldRescale(double min_hu, double max_hu);

// "CT00001.dcm" for slice 0: names sort in slice order.
std::string DicomSliceFileName(int64_t slice);

// Writes one file per slice into directory; returns their names in slice order.
absl::StatusOr<std::vector<std::string>> WriteDicomCtSeries(
    const std::string& directory, const Array3D& volume, const VolumeGeometry& geometry,
    const AcquisitionMetadata& metadata, const DicomCtSeriesOptions& options);

}  // namespace tomo::core
