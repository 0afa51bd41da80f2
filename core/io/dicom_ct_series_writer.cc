#include "core/io/dicom_ct_series_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/data/finite_values.h"
#include "core/io/durable_file.h"
#include "core/io/patient_frame.h"
#include "dcmtk/config/osconfig.h"  // must come first among DCMTK's headers
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcdict.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"
#include "dcmtk/dcmdata/dcvrda.h"
#include "dcmtk/dcmdata/dcvrtm.h"

namespace tomo::core {
namespace {

constexpr double kStoredMin = std::numeric_limits<int16_t>::min();
constexpr double kStoredMax = std::numeric_limits<int16_t>::max();
constexpr int64_t kMaxDicomSide = 65535;  // Rows and Columns are US

// The patient and study attributes that may come from the input (acquisition_metadata.h).
const DcmTagKey kCopiedTags[] = {
    DCM_PatientName,      DCM_PatientID,  DCM_PatientBirthDate,    DCM_PatientSex,
    DCM_StudyInstanceUID, DCM_StudyDate,  DCM_StudyTime,           DCM_StudyID,
    DCM_AccessionNumber,  DCM_ReferringPhysicianName, DCM_StudyDescription};

bool IsCopied(const DcmTagKey& key) {
  return std::find(std::begin(kCopiedTags), std::end(kCopiedTags), key) != std::end(kCopiedTags);
}

// A Decimal String value (DS: at most 16 characters): the most digits that fit.
std::string DecimalString(double value) {
  if (value == 0) return "0";
  for (int digits = 15; digits >= 1; --digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    if (text.size() <= 16) return text;
  }
  return absl::StrFormat("%.0e", value);
}

std::string Triple(const Vec3& v) {
  return absl::StrCat(DecimalString(v.x), "\\", DecimalString(v.y), "\\", DecimalString(v.z));
}

std::string NewUid(const char* root) {
  char uid[100];
  dcmGenerateUniqueIdentifier(uid, root);
  return uid;
}

bool IsAscii(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Tag and value of the attributes shared by every file of the series.
struct SeriesAttributes {
  std::vector<std::pair<DcmTagKey, std::string>> strings;
};

absl::Status Put(DcmDataset& dataset, const DcmTagKey& key, const std::string& value,
                 const std::string& file) {
  const OFCondition status = dataset.putAndInsertString(DcmTag(key), value.c_str());
  if (status.bad()) {
    return absl::InternalError(absl::StrCat(file, ": DCMTK cannot set ", DcmTag(key).getTagName(),
                                            " to \"", value, "\": ", status.text()));
  }
  return absl::OkStatus();
}

}  // namespace

HounsfieldRescale ChooseHounsfieldRescale(double min_hu, double max_hu) {
  // Whole HU in int16 after rounding: the usual CT scale.
  if (std::round(min_hu) >= kStoredMin && std::round(max_hu) <= kStoredMax) return {};
  // Otherwise the centre of the range at stored 0 and its half-width at +-32767.
  HounsfieldRescale rescale;
  rescale.intercept = 0.5 * (min_hu + max_hu);
  rescale.slope = std::max(0.5 * (max_hu - min_hu) / kStoredMax, 1e-6);
  return rescale;
}

std::string DicomSliceFileName(int64_t slice) {
  return absl::StrFormat("CT%05d.dcm", slice + 1);
}

absl::StatusOr<std::vector<std::string>> WriteDicomCtSeries(
    const std::string& directory, const Array3D& volume, const VolumeGeometry& geometry,
    const AcquisitionMetadata& metadata, const DicomCtSeriesOptions& options) {
  TOMO_RETURN_IF_ERROR(
      CheckDimsMatch("DICOM series", volume.dims(), geometry.dims(), "(z, y, x)"));
  const double mu_water = options.water_attenuation_per_mm;
  if (!std::isfinite(mu_water) || !(mu_water > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "water attenuation: ", mu_water,
        " 1/mm is not a finite value > 0; the Hounsfield scale of a DICOM series needs it"));
  }
  if (options.window.has_value() &&
      !(std::isfinite(options.window->lower) && std::isfinite(options.window->upper) &&
        options.window->upper > options.window->lower)) {
    return absl::InvalidArgumentError(absl::StrCat("window [", options.window->lower, ", ",
                                                   options.window->upper,
                                                   "]: upper must be finite and above lower"));
  }
  if (const int64_t bad = FirstNonFiniteIndex(volume.data(), volume.size()); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DICOM series: volume value at index ", bad, " is not finite"));
  }
  const Size3& n = geometry.size();
  if (n.x > kMaxDicomSide || n.y > kMaxDicomSide) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DICOM series: slices of ", n.x, " x ", n.y, " voxels; DICOM Rows and Columns are at most ",
        kMaxDicomSide));
  }
  if (!dcmDataDict.isDictionaryLoaded()) {
    return absl::FailedPreconditionError(
        "DCMTK's data dictionary is not loaded: set DCMDICTPATH to its dicom.dic");
  }
  const auto to_hu = [mu_water](double mu) { return 1000.0 * (mu - mu_water) / mu_water; };
  const auto [min_it, max_it] = std::minmax_element(volume.data(), volume.data() + volume.size());
  const HounsfieldRescale rescale = ChooseHounsfieldRescale(to_hu(*min_it), to_hu(*max_it));
  const DisplayWindow window =
      options.window.has_value() ? *options.window : RobustDisplayWindow(volume);
  const double window_lower_hu = to_hu(window.lower), window_upper_hu = to_hu(window.upper);

  // Attributes common to the series: the input's patient/study ones first.
  SeriesAttributes series;
  bool non_ascii = false;
  std::string study_uid;
  for (const DicomAttribute& attribute : metadata.patient_study) {
    const DcmTagKey key(attribute.group, attribute.element);
    if (!IsCopied(key)) continue;
    if (key == DCM_StudyInstanceUID) study_uid = attribute.value;
    non_ascii |= !IsAscii(attribute.value);
    series.strings.emplace_back(key, attribute.value);
  }
  if (study_uid.empty()) {
    study_uid = NewUid(SITE_STUDY_UID_ROOT);
    series.strings.emplace_back(DCM_StudyInstanceUID, study_uid);
  }
  OFString today, now;
  DcmDate::getCurrentDate(today);
  DcmTime::getCurrentTime(now);
  const auto has = [&series](const DcmTagKey& key) {
    return std::any_of(series.strings.begin(), series.strings.end(),
                       [&key](const auto& entry) { return entry.first == key; });
  };
  const std::pair<DcmTagKey, std::string> placeholders[] = {
      {DCM_PatientName, "Anonymous^Patient"},
      {DCM_PatientID, absl::StrFormat("TOMO-%08X", static_cast<uint32_t>(
                                                       std::hash<std::string>()(study_uid)))},
      {DCM_PatientBirthDate, ""},
      {DCM_PatientSex, ""},
      {DCM_StudyDate, today.c_str()},
      {DCM_StudyTime, now.c_str()},
      {DCM_StudyID, "1"},
      {DCM_AccessionNumber, ""},
      {DCM_ReferringPhysicianName, ""}};
  for (const auto& [key, value] : placeholders) {
    if (!has(key)) series.strings.emplace_back(key, value);
  }
  if (non_ascii) series.strings.emplace_back(DCM_SpecificCharacterSet, "ISO_IR 192");
  const std::string series_uid = NewUid(SITE_SERIES_UID_ROOT);
  const std::string frame_uid = NewUid(SITE_UID_ROOT ".1.5");
  const std::pair<DcmTagKey, std::string> fixed[] = {
      {DCM_SOPClassUID, UID_CTImageStorage},
      {DCM_ImageType, "ORIGINAL\\PRIMARY\\AXIAL"},
      {DCM_Modality, "CT"},
      {DCM_SeriesInstanceUID, series_uid},
      {DCM_SeriesNumber, absl::StrCat(options.series_number)},
      {DCM_SeriesDate, today.c_str()},
      {DCM_SeriesTime, now.c_str()},
      {DCM_ContentDate, today.c_str()},
      {DCM_ContentTime, now.c_str()},
      {DCM_SeriesDescription, options.series_description},
      {DCM_Manufacturer, "tomoserve"},
      {DCM_SoftwareVersions, "tomoserve"},
      {DCM_PatientPosition, "HFS"},
      {DCM_FrameOfReferenceUID, frame_uid},
      {DCM_PositionReferenceIndicator, ""},
      {DCM_Laterality, ""},  // type 2C: dciodvfy wants it when Image Laterality is absent
      {DCM_AcquisitionNumber, "1"},
      {DCM_KVP, ""},
      {DCM_ImageOrientationPatient, "1\\0\\0\\0\\1\\0"},
      {DCM_PixelSpacing, absl::StrCat(DecimalString(geometry.voxel_size_mm().y), "\\",
                                      DecimalString(geometry.voxel_size_mm().x))},
      {DCM_SliceThickness, DecimalString(geometry.voxel_size_mm().z)},
      {DCM_PhotometricInterpretation, "MONOCHROME2"},
      {DCM_RescaleIntercept, DecimalString(rescale.intercept)},
      {DCM_RescaleSlope, DecimalString(rescale.slope)},
      {DCM_RescaleType, "HU"},
      {DCM_WindowCenter, DecimalString(0.5 * (window_lower_hu + window_upper_hu))},
      {DCM_WindowWidth, DecimalString(std::max(1.0, window_upper_hu - window_lower_hu))},
  };
  for (const auto& entry : fixed) series.strings.push_back(entry);

  std::vector<Sint16> pixels(static_cast<size_t>(n.x * n.y));
  std::vector<std::string> names;
  for (int64_t z = 0; z < n.z; ++z) {
    const std::string name = DicomSliceFileName(z);
    const std::string path = (std::filesystem::path(directory) / name).string();
    DcmFileFormat file;
    DcmDataset& dataset = *file.getDataset();
    for (const auto& [key, value] : series.strings) {
      TOMO_RETURN_IF_ERROR(Put(dataset, key, value, path));
    }
    const Vec3 first_pixel = ObjectToLps(VoxelCenterMm(geometry, 0, n.y - 1, z));
    TOMO_RETURN_IF_ERROR(Put(dataset, DCM_SOPInstanceUID, NewUid(SITE_INSTANCE_UID_ROOT), path));
    TOMO_RETURN_IF_ERROR(Put(dataset, DCM_InstanceNumber, absl::StrCat(z + 1), path));
    TOMO_RETURN_IF_ERROR(Put(dataset, DCM_ImagePositionPatient, Triple(first_pixel), path));
    TOMO_RETURN_IF_ERROR(Put(dataset, DCM_SliceLocation, DecimalString(first_pixel.z), path));
    for (int64_t r = 0; r < n.y; ++r) {
      const int64_t y = n.y - 1 - r;  // row 0 is the largest y: anterior at the top
      for (int64_t x = 0; x < n.x; ++x) {
        const double stored = std::round((to_hu(volume.at(z, y, x)) - rescale.intercept) /
                                         rescale.slope);
        pixels[static_cast<size_t>(r * n.x + x)] =
            static_cast<Sint16>(std::clamp(stored, kStoredMin, kStoredMax));
      }
    }
    OFCondition status = EC_Normal;
    const auto put_us = [&](const DcmTagKey& key, Uint16 value) {
      if (status.good()) status = dataset.putAndInsertUint16(key, value);
    };
    put_us(DCM_SamplesPerPixel, 1);
    put_us(DCM_Rows, static_cast<Uint16>(n.y));
    put_us(DCM_Columns, static_cast<Uint16>(n.x));
    put_us(DCM_BitsAllocated, 16);
    put_us(DCM_BitsStored, 16);
    put_us(DCM_HighBit, 15);
    put_us(DCM_PixelRepresentation, 1);
    if (status.good()) {
      status = dataset.putAndInsertUint16Array(
          DCM_PixelData, reinterpret_cast<const Uint16*>(pixels.data()), pixels.size());
    }
    const std::string temporary = TemporaryPathFor(path);
    if (status.good()) {
      status = file.saveFile(temporary.c_str(), EXS_LittleEndianExplicit, EET_ExplicitLength);
    }
    if (status.bad()) {
      std::remove(temporary.c_str());
      return absl::InternalError(
          absl::StrCat(path, ": DCMTK cannot write the slice: ", status.text()));
    }
    TOMO_RETURN_IF_ERROR(SyncAndRename(temporary, path));
    names.push_back(name);
  }
  return names;
}

}  // namespace tomo::core
