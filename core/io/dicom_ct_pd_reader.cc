#include "core/io/dicom_ct_pd_reader.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/io/mapped_file.h"
#include "core/io/projection_preprocessing.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdatset.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcistrmb.h"
#include "dcmtk/dcmdata/dcmetinf.h"
#include "dcmtk/dcmdata/dcxfer.h"

namespace tomo::core {
namespace {

// A private element: its key and its name in the DICOM-CT-PD dictionary, for messages.
struct Attribute {
  uint16_t group, element;
  const char* name;
  DcmTagKey key() const { return DcmTagKey(group, element); }
};

std::string Describe(const Attribute& a) {
  char tag[16];
  std::snprintf(tag, sizeof(tag), "(%04X,%04X)", a.group, a.element);
  return absl::StrCat(a.name, " ", tag);
}

constexpr Attribute kDetectorRows{0x7029, 0x1010, "NumberofDetectorRows"};
constexpr Attribute kDetectorColumns{0x7029, 0x1011, "NumberofDetectorColumns"};
constexpr Attribute kTransverseSpacing{0x7029, 0x1002, "DetectorElementTransverseSpacing"};
constexpr Attribute kAxialSpacing{0x7029, 0x1006, "DetectorElementAxialSpacing"};
constexpr Attribute kDetectorShape{0x7029, 0x100B, "DetectorShape"};
constexpr Attribute kAngularPosition{0x7031, 0x1001, "DetectorFocalCenterAngularPosition"};
constexpr Attribute kAxialPosition{0x7031, 0x1002, "DetectorFocalCenterAxialPosition"};
constexpr Attribute kRadialDistance{0x7031, 0x1003, "DetectorFocalCenterRadialDistance"};
constexpr Attribute kConstantRadialDistance{0x7031, 0x1031, "ConstantRadialDistance"};
constexpr Attribute kCentralElement{0x7031, 0x1033, "DetectorCentralElement"};
constexpr Attribute kSourceAngularShift{0x7033, 0x100B, "SourceAngularPositionShift"};
constexpr Attribute kSourceAxialShift{0x7033, 0x100C, "SourceAxialPositionShift"};
constexpr Attribute kSourceRadialShift{0x7033, 0x100D, "SourceRadialDistanceShift"};
constexpr Attribute kFlyingFocalSpotMode{0x7033, 0x100E, "FlyingFocalSpotMode"};
constexpr Attribute kPhotonStatistics{0x7033, 0x1065, "PhotonStatistics"};
constexpr Attribute kLogFlag{0x7039, 0x1009, "LogFlag"};
constexpr Attribute kWaterAttenuation{0x7041, 0x1001, "WaterAttenuationCoefficient"};
constexpr Attribute kRows{0x0028, 0x0010, "Rows"};
constexpr Attribute kColumns{0x0028, 0x0011, "Columns"};
constexpr Attribute kBitsAllocated{0x0028, 0x0100, "BitsAllocated"};
constexpr Attribute kPixelRepresentation{0x0028, 0x0103, "PixelRepresentation"};
constexpr Attribute kSamplesPerPixel{0x0028, 0x0002, "SamplesPerPixel"};
constexpr Attribute kRescaleSlope{0x0028, 0x1053, "RescaleSlope"};
constexpr Attribute kRescaleIntercept{0x0028, 0x1052, "RescaleIntercept"};
constexpr Attribute kPixelData{0x7FE0, 0x0010, "PixelData"};

// Patient and study module attributes copied into AcquisitionMetadata (when present).
constexpr Attribute kPatientStudy[] = {
    {0x0010, 0x0010, "PatientName"},      {0x0010, 0x0020, "PatientID"},
    {0x0010, 0x0030, "PatientBirthDate"}, {0x0010, 0x0040, "PatientSex"},
    {0x0020, 0x000D, "StudyInstanceUID"}, {0x0008, 0x0020, "StudyDate"},
    {0x0008, 0x0030, "StudyTime"},        {0x0020, 0x0010, "StudyID"},
    {0x0008, 0x0050, "AccessionNumber"},  {0x0008, 0x0090, "ReferringPhysicianName"},
    {0x0008, 0x1030, "StudyDescription"}};

// Largest plausible counts of values in one private numeric element (PhotonStatistics has
// one per detector column at most).
constexpr unsigned long kMaxNumericValues = 1 << 16;

// How an untyped (UN) element's bytes hold its values, as the dictionary's VR says.
enum class Binary { kFloat32, kUint16, kDecimalText };

absl::Status Missing(absl::string_view file, const Attribute& a) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", Describe(a), " missing"));
}

// The numeric values of an element whatever its VR; `binary` says how UN/OB bytes are laid
// out. nullopt when absent.
absl::StatusOr<std::optional<std::vector<double>>> Numbers(DcmItem& item, const Attribute& a,
                                                           Binary binary,
                                                           absl::string_view file) {
  DcmElement* element = nullptr;
  if (item.findAndGetElement(a.key(), element).bad() || element == nullptr) {
    return std::optional<std::vector<double>>();
  }
  std::vector<double> values;
  const DcmEVR vr = element->ident();
  const auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", Describe(a), " ", what, " (VR ", DcmVR(vr).getVRName(), ")"));
  };
  switch (vr) {
    case EVR_FL:
    case EVR_FD:
    case EVR_DS:
    case EVR_IS:
    case EVR_US:
    case EVR_SS:
    case EVR_UL:
    case EVR_SL: {
      const unsigned long count = element->getVM();
      if (count > kMaxNumericValues) return bad("has too many values");
      for (unsigned long i = 0; i < count; ++i) {
        double value = 0;
        OFCondition status;
        if (vr == EVR_FL) {
          Float32 f = 0;
          status = element->getFloat32(f, i);
          value = f;
        } else if (vr == EVR_FD || vr == EVR_DS) {
          Float64 f = 0;
          status = element->getFloat64(f, i);
          value = f;
        } else if (vr == EVR_US) {
          Uint16 u = 0;
          status = element->getUint16(u, i);
          value = u;
        } else if (vr == EVR_SS) {
          Sint16 s = 0;
          status = element->getSint16(s, i);
          value = s;
        } else if (vr == EVR_UL) {
          Uint32 u = 0;
          status = element->getUint32(u, i);
          value = u;
        } else {
          Sint32 s = 0;
          status = element->getSint32(s, i);
          value = s;
        }
        if (status.bad()) return bad("cannot be read as a number");
        values.push_back(value);
      }
      break;
    }
    default: {
      // Untyped bytes: UN or OB, or an implicit-VR file's private element that DCMTK's
      // dictionary does not know; the dictionary's VR says how to read them.
      if (vr == EVR_SQ || vr == EVR_item || vr == EVR_pixelSQ) return bad("is not numeric");
      Uint8* bytes = nullptr;
      if (element->getUint8Array(bytes).bad() && element->getLength() > 0) {
        return bad("cannot be read");
      }
      const unsigned long length = element->getLength();
      if (binary == Binary::kDecimalText) {
        // DS: decimal strings separated by backslashes.
        const std::string text(reinterpret_cast<const char*>(bytes), bytes != nullptr ? length : 0);
        for (absl::string_view part : absl::StrSplit(text, '\\')) {
          double value;
          if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &value)) {
            return bad("is not a decimal string");
          }
          values.push_back(value);
          if (values.size() > kMaxNumericValues) return bad("has too many values");
        }
        break;
      }
      const unsigned long width = binary == Binary::kFloat32 ? 4 : 2;
      if (length % width != 0) return bad("has a length that is not a whole number of values");
      if (length / width > kMaxNumericValues) return bad("has too many values");
      for (unsigned long i = 0; bytes != nullptr && i < length / width; ++i) {
        if (binary == Binary::kFloat32) {
          float f;
          std::memcpy(&f, bytes + 4 * i, 4);
          values.push_back(f);
        } else {
          uint16_t u = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
          values.push_back(u);
        }
      }
      break;
    }
  }
  return std::optional<std::vector<double>>(std::move(values));
}

absl::StatusOr<double> RequiredNumber(DcmItem& item, const Attribute& a, Binary binary,
                                      absl::string_view file) {
  TOMO_ASSIGN_OR_RETURN(std::optional<std::vector<double>> values,
                        Numbers(item, a, binary, file));
  if (!values.has_value() || values->empty()) return Missing(file, a);
  if (!std::isfinite((*values)[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", Describe(a), " ", (*values)[0], " is not finite"));
  }
  return (*values)[0];
}

absl::StatusOr<double> OptionalNumber(DcmItem& item, const Attribute& a, Binary binary,
                                      double fallback, absl::string_view file) {
  TOMO_ASSIGN_OR_RETURN(std::optional<std::vector<double>> values,
                        Numbers(item, a, binary, file));
  if (!values.has_value() || values->empty()) return fallback;
  if (!std::isfinite((*values)[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", Describe(a), " ", (*values)[0], " is not finite"));
  }
  return (*values)[0];
}

// A code string (CS/LO/... or UN bytes), upper-cased and trimmed; nullopt when absent.
std::optional<std::string> Text(DcmItem& item, const Attribute& a) {
  DcmElement* element = nullptr;
  if (item.findAndGetElement(a.key(), element).bad() || element == nullptr) return std::nullopt;
  std::string text;
  const DcmEVR vr = element->ident();
  if (vr == EVR_UN || vr == EVR_OB || vr == EVR_UNKNOWN || vr == EVR_UNKNOWN2B) {
    Uint8* bytes = nullptr;
    if (element->getUint8Array(bytes).good() && bytes != nullptr) {
      text.assign(reinterpret_cast<const char*>(bytes), element->getLength());
    }
  } else {
    OFString value;
    if (element->getOFStringArray(value).good()) text = value.c_str();
  }
  text.erase(std::find(text.begin(), text.end(), '\0'), text.end());
  return absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
}

absl::StatusOr<int64_t> RequiredCount(DcmItem& item, const Attribute& a, absl::string_view file) {
  TOMO_ASSIGN_OR_RETURN(double value, RequiredNumber(item, a, Binary::kUint16, file));
  if (value < 1 || value > VectorGeometry::kMaxDetectorSide || value != std::floor(value)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", Describe(a), " ", value,
                                                   " is out of range [1, ",
                                                   VectorGeometry::kMaxDetectorSide, "]"));
  }
  return static_cast<int64_t>(value);
}

struct ParsedFile {
  std::unique_ptr<DcmFileFormat> format;
  DicomCtPdHeader header;
};

const char* TransferSyntaxName(E_TransferSyntax xfer) {
  const DcmXfer x(xfer);
  return x.getXferName();
}

// DCMTK 3.6.7 allocates an element's value as long as its length field says before it
// finds that fewer bytes remain (fuzzing found a 289-byte file that makes it allocate
// 3.3 GB), so the top level of the file is walked first: every element's defined length
// must fit in the bytes that remain. An undefined length (a sequence or encapsulated pixel
// data) ends the walk; what follows is DCMTK's to parse.
absl::Status CheckElementLengths(const unsigned char* data, size_t size, absl::string_view name) {
  size_t at = 0;
  if (size >= 132 && std::memcmp(data + 128, "DICM", 4) == 0) at = 132;
  const auto u16 = [&](size_t i) { return static_cast<uint32_t>(data[i] | (data[i + 1] << 8)); };
  const auto u32 = [&](size_t i) {
    return static_cast<uint32_t>(data[i]) | (static_cast<uint32_t>(data[i + 1]) << 8) |
           (static_cast<uint32_t>(data[i + 2]) << 16) | (static_cast<uint32_t>(data[i + 3]) << 24);
  };
  std::string transfer_syntax;  // from the meta header, (0002,0010)
  while (at + 8 <= size) {
    const uint32_t group = u16(at), element = u16(at + 2);
    if (group != 0x0002 && !transfer_syntax.empty() && transfer_syntax != "1.2.840.10008.1.2" &&
        transfer_syntax != "1.2.840.10008.1.2.1") {
      // The data set is big endian, deflated or encapsulated: not walked, and not read.
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": TransferSyntaxUID (0002,0010) ", transfer_syntax,
          " is not supported; expected uncompressed little endian (1.2.840.10008.1.2 or "
          "1.2.840.10008.1.2.1)"));
    }
    const char vr[3] = {static_cast<char>(data[at + 4]), static_cast<char>(data[at + 5]), 0};
    const bool explicit_vr = absl::ascii_isupper(static_cast<unsigned char>(vr[0])) &&
                             absl::ascii_isupper(static_cast<unsigned char>(vr[1]));
    uint64_t length;
    size_t header;
    if (explicit_vr) {
      static constexpr const char* kLongVrs[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                                 "SV", "UC", "UN", "UR", "UT", "UV"};
      bool long_form = false;
      for (const char* long_vr : kLongVrs) long_form |= std::strcmp(vr, long_vr) == 0;
      if (long_form) {
        if (at + 12 > size) break;
        length = u32(at + 8);
        header = 12;
      } else {
        length = u16(at + 6);
        header = 8;
      }
    } else {
      length = u32(at + 4);
      header = 8;
    }
    if (length == 0xFFFFFFFFu) break;  // undefined length: DCMTK's to delimit
    const uint64_t remaining = size - at - header;
    if (length > remaining) {
      char tag[16];
      std::snprintf(tag, sizeof(tag), "(%04X,%04X)", group, element);
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": not a readable DICOM file: element ", tag, " declares ", length,
          " bytes at byte ", at, ", only ", remaining, " remain (truncated or corrupt)"));
    }
    if (group == 0x0002 && element == 0x0010) {
      transfer_syntax.assign(reinterpret_cast<const char*>(data + at + header),
                             static_cast<size_t>(length));
      transfer_syntax.erase(std::find(transfer_syntax.begin(), transfer_syntax.end(), '\0'),
                            transfer_syntax.end());
      transfer_syntax = std::string(absl::StripAsciiWhitespace(transfer_syntax));
    }
    at += header + static_cast<size_t>(length);
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedFile> Parse(const void* bytes, size_t size_bytes, absl::string_view name,
                                 bool with_pixels) {
  TOMO_RETURN_IF_ERROR(
      CheckElementLengths(static_cast<const unsigned char*>(bytes), size_bytes, name));
  ParsedFile parsed;
  parsed.format = std::make_unique<DcmFileFormat>();
  DcmInputBufferStream stream;
  stream.setBuffer(bytes, static_cast<offile_off_t>(size_bytes));
  stream.setEos();
  parsed.format->transferInit();
  // With pixels, every value is read now (a buffer stream cannot be read again on first
  // access); for the header alone, values longer than kHeaderValueBytes (the pixel data)
  // are skipped over, unread.
  constexpr Uint32 kHeaderValueBytes = 1 << 16;
  const OFCondition status = parsed.format->read(
      stream, EXS_Unknown, EGL_noChange, with_pixels ? 0xFFFFFFFEu : kHeaderValueBytes);
  parsed.format->transferEnd();
  if (status.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a readable DICOM file (DCMTK: ", status.text(), ")"));
  }
  DcmDataset& data = *parsed.format->getDataset();
  const E_TransferSyntax xfer = data.getOriginalXfer();
  if (xfer != EXS_LittleEndianImplicit && xfer != EXS_LittleEndianExplicit) {
    OFString uid;
    parsed.format->getMetaInfo()->findAndGetOFString(DCM_TransferSyntaxUID, uid);
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": TransferSyntaxUID (0002,0010) ", uid.c_str(), " (", TransferSyntaxName(xfer),
        ") is not supported; expected uncompressed little endian (1.2.840.10008.1.2 or "
        "1.2.840.10008.1.2.1)"));
  }
  DicomCtPdDetector& d = parsed.header.detector;
  TOMO_ASSIGN_OR_RETURN(d.rows, RequiredCount(data, kDetectorRows, name));
  TOMO_ASSIGN_OR_RETURN(d.columns, RequiredCount(data, kDetectorColumns, name));
  TOMO_ASSIGN_OR_RETURN(d.column_spacing_mm,
                        RequiredNumber(data, kTransverseSpacing, Binary::kFloat32, name));
  TOMO_ASSIGN_OR_RETURN(d.row_spacing_mm,
                        RequiredNumber(data, kAxialSpacing, Binary::kFloat32, name));
  const std::optional<std::string> shape = Text(data, kDetectorShape);
  if (!shape.has_value()) return Missing(name, kDetectorShape);
  if (*shape == "CYLINDRICAL") {
    d.shape = DetectorShape::kCylindrical;
  } else if (*shape == "FLAT") {
    d.shape = DetectorShape::kFlat;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(kDetectorShape), " \"",
                                                   *shape,
                                                   "\" is not supported; expected CYLINDRICAL "
                                                   "or FLAT"));
  }
  TOMO_ASSIGN_OR_RETURN(d.focal_center_to_detector_mm,
                        RequiredNumber(data, kConstantRadialDistance, Binary::kFloat32, name));
  TOMO_ASSIGN_OR_RETURN(std::optional<std::vector<double>> central,
                        Numbers(data, kCentralElement, Binary::kFloat32, name));
  if (!central.has_value()) return Missing(name, kCentralElement);
  if (central->size() != 2 || !std::isfinite((*central)[0]) || !std::isfinite((*central)[1])) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(kCentralElement), " has ",
                                                   central->size(),
                                                   " values; expected 2 finite (column, row)"));
  }
  d.central_column = (*central)[0];
  d.central_row = (*central)[1];

  DicomCtPdView& v = parsed.header.view;
  TOMO_ASSIGN_OR_RETURN(v.focal_center_angle_rad,
                        RequiredNumber(data, kAngularPosition, Binary::kFloat32, name));
  TOMO_ASSIGN_OR_RETURN(v.focal_center_z_mm,
                        RequiredNumber(data, kAxialPosition, Binary::kFloat32, name));
  TOMO_ASSIGN_OR_RETURN(v.focal_center_radius_mm,
                        RequiredNumber(data, kRadialDistance, Binary::kFloat32, name));
  TOMO_ASSIGN_OR_RETURN(v.source_angle_shift_rad,
                        OptionalNumber(data, kSourceAngularShift, Binary::kFloat32, 0, name));
  TOMO_ASSIGN_OR_RETURN(v.source_z_shift_mm,
                        OptionalNumber(data, kSourceAxialShift, Binary::kFloat32, 0, name));
  TOMO_ASSIGN_OR_RETURN(v.source_radius_shift_mm,
                        OptionalNumber(data, kSourceRadialShift, Binary::kFloat32, 0, name));

  // The image: one DICOM row per detector channel.
  TOMO_ASSIGN_OR_RETURN(double image_rows, RequiredNumber(data, kRows, Binary::kUint16, name));
  TOMO_ASSIGN_OR_RETURN(double image_columns,
                        RequiredNumber(data, kColumns, Binary::kUint16, name));
  if (image_rows != static_cast<double>(d.columns) ||
      image_columns != static_cast<double>(d.rows)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": Rows (0028,0010) x Columns (0028,0011) is ", image_rows, " x ", image_columns,
        "; expected ", d.columns, " x ", d.rows, " (", Describe(kDetectorColumns), " x ",
        Describe(kDetectorRows), ": one image row per detector channel)"));
  }
  TOMO_ASSIGN_OR_RETURN(double bits, RequiredNumber(data, kBitsAllocated, Binary::kUint16, name));
  TOMO_ASSIGN_OR_RETURN(double representation,
                        OptionalNumber(data, kPixelRepresentation, Binary::kUint16, 0, name));
  TOMO_ASSIGN_OR_RETURN(double samples,
                        OptionalNumber(data, kSamplesPerPixel, Binary::kUint16, 1, name));
  if (bits != 16 || representation != 0 || samples != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": BitsAllocated (0028,0100) ", bits, ", PixelRepresentation (0028,0103) ",
        representation, ", SamplesPerPixel (0028,0002) ", samples,
        " is not supported; expected 16, 0 and 1 (unsigned 16-bit grey values)"));
  }
  if (with_pixels) {
    // Before anything is allocated for the pixels: the file must hold them (its element
    // lengths were checked against its size), which bounds what a forged header can ask for.
    DcmElement* pixels = nullptr;
    if (data.findAndGetElement(DCM_PixelData, pixels).bad() || pixels == nullptr) {
      return Missing(name, kPixelData);
    }
    const uint64_t expected = static_cast<uint64_t>(d.rows) * static_cast<uint64_t>(d.columns) * 2;
    if (pixels->getLength() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", Describe(kPixelData), " holds ", pixels->getLength(), " bytes, expected ",
          expected, " (", d.columns, " channels x ", d.rows, " rows x 2 bytes)"));
    }
  }
  return parsed;
}

// Decodes one parsed file's pixels into `to` (rows x columns) as line integrals; returns
// its photon statistics.
absl::StatusOr<std::vector<double>> DecodePixels(ParsedFile& parsed, absl::string_view name,
                                                 float* to) {
  DcmDataset& data = *parsed.format->getDataset();
  const DicomCtPdDetector& d = parsed.header.detector;
  const Uint16* pixels = nullptr;
  unsigned long count = 0;
  if (data.findAndGetUint16Array(DCM_PixelData, pixels, &count).bad() || pixels == nullptr) {
    return Missing(name, kPixelData);
  }
  const unsigned long expected = static_cast<unsigned long>(d.rows * d.columns);
  if (count != expected) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(kPixelData), " holds ",
                                                   count, " values, expected ", expected, " (",
                                                   d.columns, " channels x ", d.rows,
                                                   " rows)"));
  }
  TOMO_ASSIGN_OR_RETURN(double slope,
                        OptionalNumber(data, kRescaleSlope, Binary::kFloat32, 1, name));
  TOMO_ASSIGN_OR_RETURN(double intercept,
                        OptionalNumber(data, kRescaleIntercept, Binary::kFloat32, 0, name));
  if (slope == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": RescaleSlope (0028,1053) is 0"));
  }
  TOMO_ASSIGN_OR_RETURN(std::optional<std::vector<double>> photons,
                        Numbers(data, kPhotonStatistics, Binary::kFloat32, name));
  for (int64_t c = 0; c < d.columns; ++c) {
    for (int64_t r = 0; r < d.rows; ++r) {
      to[r * d.columns + c] = static_cast<float>(slope * pixels[c * d.rows + r] + intercept);
    }
  }
  const std::optional<std::string> log_flag = Text(data, kLogFlag);
  bool intensities = false;
  if (log_flag.has_value()) {
    const std::string& f = *log_flag;
    if (f == "NO" || f == "N" || f == "FALSE" || f == "0") {
      intensities = true;
    } else if (!(f.empty() || f == "YES" || f == "Y" || f == "TRUE" || f == "1" || f == "LOG")) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", Describe(kLogFlag), " \"", f,
          "\" is not understood; expected YES (line integrals) or NO (intensities)"));
    }
  }
  if (intensities) {
    if (!photons.has_value() || photons->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", Describe(kLogFlag), " says the data are intensities, but ",
          Describe(kPhotonStatistics),
          " (the unattenuated intensity I0 of -ln(I / I0)) is missing"));
    }
    const bool per_column = static_cast<int64_t>(photons->size()) == d.columns;
    for (int64_t c = 0; c < d.columns; ++c) {
      const double i0 = per_column ? (*photons)[static_cast<size_t>(c)] : (*photons)[0];
      if (!(i0 > 0) || !std::isfinite(i0)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(kPhotonStatistics),
                                                       " value ", i0,
                                                       " must be finite and > 0"));
      }
      for (int64_t r = 0; r < d.rows; ++r) to[r * d.columns + c] /= static_cast<float>(i0);
    }
    Array3D view = Array3D::Uninitialized({1, d.rows, d.columns});
    std::memcpy(view.data(), to, view.size_bytes());
    TOMO_RETURN_IF_ERROR(NegativeLog(view).status());
    std::memcpy(to, view.data(), view.size_bytes());
  }
  for (int64_t i = 0; i < d.rows * d.columns; ++i) {
    if (!std::isfinite(to[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": value ", to[i], " at (row ", i / d.columns, ", column ", i % d.columns,
          ") is not finite after RescaleSlope/RescaleIntercept"));
    }
  }
  return photons.value_or(std::vector<double>());
}

absl::Status SameDetector(const DicomCtPdDetector& a, const DicomCtPdDetector& b,
                          absl::string_view name, absl::string_view first_name) {
  const auto differs = [&](const Attribute& attribute, double value, double first) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(attribute), " ", value,
                                                   " differs from ", first, " in ", first_name));
  };
  if (a.rows != b.rows) return differs(kDetectorRows, a.rows, b.rows);
  if (a.columns != b.columns) return differs(kDetectorColumns, a.columns, b.columns);
  if (a.row_spacing_mm != b.row_spacing_mm) {
    return differs(kAxialSpacing, a.row_spacing_mm, b.row_spacing_mm);
  }
  if (a.column_spacing_mm != b.column_spacing_mm) {
    return differs(kTransverseSpacing, a.column_spacing_mm, b.column_spacing_mm);
  }
  if (a.shape != b.shape) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", Describe(kDetectorShape),
                                                   " differs from the one in ", first_name));
  }
  if (a.focal_center_to_detector_mm != b.focal_center_to_detector_mm) {
    return differs(kConstantRadialDistance, a.focal_center_to_detector_mm,
                   b.focal_center_to_detector_mm);
  }
  if (a.central_column != b.central_column) {
    return differs(kCentralElement, a.central_column, b.central_column);
  }
  if (a.central_row != b.central_row) return differs(kCentralElement, a.central_row, b.central_row);
  return absl::OkStatus();
}

AcquisitionMetadata Metadata(DcmDataset& data, absl::string_view name,
                             absl::Status& water_status) {
  AcquisitionMetadata metadata;
  for (const Attribute& a : kPatientStudy) {
    OFString value;
    if (data.findAndGetOFStringArray(a.key(), value).good() && !value.empty()) {
      metadata.patient_study.push_back({a.group, a.element, value.c_str()});
    }
  }
  absl::StatusOr<std::optional<std::vector<double>>> water =
      Numbers(data, kWaterAttenuation, Binary::kDecimalText, name);
  if (!water.ok()) {
    water_status = water.status();
  } else if (water->has_value() && !(*water)->empty()) {
    const double mu = (**water)[0];
    if (!(mu > 0) || !std::isfinite(mu)) {
      water_status = absl::InvalidArgumentError(absl::StrCat(
          name, ": ", Describe(kWaterAttenuation), " ", mu, " must be finite and > 0 (per mm)"));
    } else {
      metadata.water_attenuation_per_mm = mu;
    }
  }
  return metadata;
}

}  // namespace

absl::Status CheckSameDicomCtPdDetector(const DicomCtPdDetector& detector,
                                       absl::string_view name, const DicomCtPdDetector& first,
                                       absl::string_view first_name) {
  return SameDetector(detector, first, name, first_name);
}

absl::StatusOr<DicomCtPdHeader> ParseDicomCtPdHeader(const void* bytes, size_t size_bytes,
                                                     absl::string_view name) {
  TOMO_ASSIGN_OR_RETURN(ParsedFile parsed, Parse(bytes, size_bytes, name, /*with_pixels=*/false));
  // The geometry of this one view must make sense on its own too.
  TOMO_RETURN_IF_ERROR(
      MakeDicomCtPdGeometry(parsed.header.detector, {parsed.header.view}).status());
  return parsed.header;
}

absl::StatusOr<DicomCtPdAcquisition> DecodeDicomCtPd(const std::vector<DicomBytes>& files) {
  if (files.empty()) return absl::InvalidArgumentError("DICOM-CT-PD: no files");
  if (static_cast<int64_t>(files.size()) > VectorGeometry::kMaxViews) {
    return absl::InvalidArgumentError(absl::StrCat("DICOM-CT-PD: ", files.size(),
                                                   " files is more than ",
                                                   VectorGeometry::kMaxViews, " views"));
  }
  const int64_t views = static_cast<int64_t>(files.size());
  std::vector<DicomCtPdView> view_geometry;
  view_geometry.reserve(files.size());
  DicomCtPdDetector detector;
  Array3D projections;
  std::vector<std::vector<double>> photons(files.size());
  AcquisitionMetadata metadata;
  std::string ffs_mode;
  for (int64_t i = 0; i < views; ++i) {
    const DicomBytes& file = files[static_cast<size_t>(i)];
    TOMO_ASSIGN_OR_RETURN(ParsedFile parsed,
                          Parse(file.bytes, file.size_bytes, file.name, /*with_pixels=*/true));
    if (i == 0) {
      detector = parsed.header.detector;
      projections = Array3D::Uninitialized({views, detector.rows, detector.columns});
      absl::Status water_status;
      metadata = Metadata(*parsed.format->getDataset(), file.name, water_status);
      TOMO_RETURN_IF_ERROR(water_status);
      ffs_mode = Text(*parsed.format->getDataset(), kFlyingFocalSpotMode).value_or("");
    } else {
      TOMO_RETURN_IF_ERROR(SameDetector(parsed.header.detector, detector, file.name, files[0].name));
    }
    view_geometry.push_back(parsed.header.view);
    TOMO_ASSIGN_OR_RETURN(
        photons[static_cast<size_t>(i)],
        DecodePixels(parsed, file.name, projections.data() + i * detector.rows * detector.columns));
    if (photons[static_cast<size_t>(i)].size() != photons[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file.name, ": ", Describe(kPhotonStatistics), " has ",
          photons[static_cast<size_t>(i)].size(), " values, ", files[0].name, " has ",
          photons[0].size(), "; every file needs the same number (or none)"));
    }
  }
  absl::StatusOr<VectorGeometry> geometry = MakeDicomCtPdGeometry(detector, view_geometry);
  if (!geometry.ok()) {
    return absl::Status(geometry.status().code(),
                        absl::StrCat("DICOM-CT-PD geometry: ", geometry.status().message()));
  }
  Array3D photon_statistics;
  const int64_t n = static_cast<int64_t>(photons[0].size());
  if (n > 0) {
    photon_statistics = Array3D::Uninitialized({views, 1, n});
    for (int64_t i = 0; i < views; ++i) {
      for (int64_t k = 0; k < n; ++k) {
        photon_statistics.at(i, 0, k) =
            static_cast<float>(photons[static_cast<size_t>(i)][static_cast<size_t>(k)]);
      }
    }
  }
  return DicomCtPdAcquisition{*std::move(geometry), std::move(projections),
                              std::move(photon_statistics), std::move(metadata),
                              std::move(ffs_mode)};
}

absl::StatusOr<DicomCtPdAcquisition> ReadDicomCtPdFiles(const std::vector<std::string>& paths) {
  std::vector<MappedFile> mapped;
  std::vector<DicomBytes> files;
  for (const std::string& path : paths) {
    TOMO_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    files.push_back({path, file.data(), file.size()});
    mapped.push_back(std::move(file));
  }
  return DecodeDicomCtPd(files);
}

}  // namespace tomo::core
