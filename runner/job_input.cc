#include "runner/job_input.h"


#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/checked_arithmetic.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/io/dicom_ct_pd_reader.h"
#include "core/io/hdf5_scan_reader.h"
#include "core/io/mapped_file.h"
#include "core/io/projection_preprocessing.h"
#include "core/io/raw_io.h"
#include "core/io/raw_stream.h"
#include "core/io/tiff_stack_reader.h"
#include "core/preprocessing/detector_correction.h"
#include "core/preprocessing/detector_mask.h"
#include "runner/geometry_ranges.h"
#include "runner/icd_job_spec.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

// The spooled input, mapped; DATA_LOSS when it is not the size the spec says.
absl::StatusOr<core::MappedFile> MapSpooledInput(const std::string& path,
                                                 uint64_t expected_bytes) {
  TOMO_ASSIGN_OR_RETURN(core::MappedFile mapped, core::MappedFile::Open(path));
  if (mapped.size() != expected_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": ", mapped.size(),
                                            " bytes, the spec's input.size_bytes is ",
                                            expected_bytes));
  }
  return mapped;
}

// One uploaded file inside the spooled input.
struct Part {
  std::string name;
  pb::InputRole role = pb::INPUT_ROLE_PROJECTIONS;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The uploaded files' places in the spooled input of mapped_bytes. The spec's validation
// refused sums past 2^64 and the map's size matched input.size_bytes; checked again here
// so that no part can ever reach past the mapping, whatever the spec says (DATA_LOSS).
absl::StatusOr<std::vector<Part>> Parts(const pb::ProjectionInput& input,
                                        uint64_t mapped_bytes) {
  std::vector<Part> parts;
  if (input.files().empty()) {
    parts.push_back({"input", pb::INPUT_ROLE_PROJECTIONS, 0, input.size_bytes()});
  } else {
    uint64_t offset = 0;
    for (const pb::InputFile& file : input.files()) {
      const pb::InputRole role =
          file.role() == pb::INPUT_ROLE_UNSPECIFIED ? pb::INPUT_ROLE_PROJECTIONS : file.role();
      parts.push_back({file.name(), role, offset, file.size_bytes()});
      offset = core::CheckedAdd<uint64_t>(offset, file.size_bytes()).value_or(UINT64_MAX);
    }
  }
  for (const Part& part : parts) {
    const std::optional<uint64_t> end = core::CheckedAdd<uint64_t>(part.offset, part.size);
    if (!end || *end > mapped_bytes) {
      return absl::DataLossError(absl::StrCat(
          "input: ", part.name, " (", part.size, " bytes at offset ", part.offset,
          ") reaches past the end of the spooled input of ", mapped_bytes, " bytes"));
    }
  }
  return parts;
}

std::vector<Part> WithRole(const std::vector<Part>& parts, pb::InputRole role) {
  std::vector<Part> chosen;
  for (const Part& part : parts) {
    if (part.role == role) chosen.push_back(part);
  }
  return chosen;
}

core::RawStreamLayout RawLayout(const pb::ProjectionInput& input, core::Dims3 dims) {
  core::RawStreamLayout layout;
  const pb::DataEncoding e = input.encoding();
  layout.sample = (e == pb::DATA_ENCODING_UINT16_LE || e == pb::DATA_ENCODING_UINT16_BE)
                      ? core::RawSampleType::kUint16
                      : core::RawSampleType::kFloat32;
  layout.byte_order = (e == pb::DATA_ENCODING_FLOAT32_BE || e == pb::DATA_ENCODING_UINT16_BE)
                          ? core::RawByteOrder::kBigEndian
                          : core::RawByteOrder::kLittleEndian;
  layout.order = input.order() == pb::AXIS_ORDER_ROW_VIEW_COLUMN
                     ? core::RawAxisOrder::kRowViewColumn
                     : core::RawAxisOrder::kViewRowColumn;
  layout.dims = dims;
  return layout;
}

std::string PartNames(const std::vector<Part>& parts) {
  if (parts.size() == 1) return parts[0].name;
  return absl::StrCat(parts.front().name, " .. ", parts.back().name, " (", parts.size(),
                      " files)");
}

// The raw values of several parts as one stream (copied only when they are not adjacent).
// whole_frames: dark and flat files hold whole frames one after another, whatever the
// projections' order.
absl::StatusOr<core::Array3D> DecodeRawParts(const core::MappedFile& mapped,
                                             const std::vector<Part>& parts,
                                             const pb::ProjectionInput& input, int64_t frames,
                                             int64_t rows, int64_t columns, bool whole_frames) {
  core::RawStreamLayout layout = RawLayout(input, {frames, rows, columns});
  if (whole_frames) layout.order = core::RawAxisOrder::kViewRowColumn;
  bool adjacent = true;
  core::CheckedSum<uint64_t> sum;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && parts[i].offset != parts[i - 1].offset + parts[i - 1].size) adjacent = false;
    sum.Add(parts[i].size);
  }
  // Parts lie inside one mapping (Parts() checked), so their sum fits memory.
  const std::optional<size_t> total_or = sum.ok() ? core::CheckedCast<size_t>(sum.value())
                                                  : std::nullopt;
  if (!total_or) {
    return absl::InvalidArgumentError(absl::StrCat("input: ", PartNames(parts),
                                                   " total more bytes than fit in memory"));
  }
  const size_t total = *total_or;
  if (adjacent) {
    return core::DecodeRawStream(mapped.data() + parts[0].offset, total,
                                 layout, PartNames(parts));
  }
  std::vector<unsigned char> joined;
  joined.reserve(total);
  for (const Part& part : parts) {
    joined.insert(joined.end(), mapped.data() + part.offset,
                  mapped.data() + part.offset + part.size);
  }
  return core::DecodeRawStream(joined.data(), joined.size(), layout, PartNames(parts));
}

std::vector<core::TiffBytes> TiffParts(const core::MappedFile& mapped,
                                       const std::vector<Part>& parts) {
  std::vector<core::TiffBytes> files;
  for (const Part& part : parts) {
    files.push_back({part.name, mapped.data() + part.offset, static_cast<size_t>(part.size)});
  }
  return files;
}

absl::Status MatchesGeometry(const core::Dims3& dims, const core::Dims3& expected,
                             absl::string_view what) {
  if (dims == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input: ", what, " ", core::DimsText(dims), " (views, rows, columns) do not match the "
      "geometry's ", core::DimsText(expected)));
}

// The averaged dark or flat frame of `role`, or an empty array when none was uploaded.
absl::StatusOr<core::Array3D> FieldFrame(const core::MappedFile& mapped,
                                         const std::vector<Part>& parts,
                                         const pb::ProjectionInput& input, pb::InputRole role,
                                         const core::Dims3& dims) {
  const std::vector<Part> chosen = WithRole(parts, role);
  if (chosen.empty()) return core::Array3D();
  const char* what = role == pb::INPUT_ROLE_DARK_FIELD ? "dark field" : "flat field";
  core::Array3D frames;
  if (input.encoding() == pb::DATA_ENCODING_TIFF) {
    TOMO_ASSIGN_OR_RETURN(frames, core::DecodeTiffStack(TiffParts(mapped, chosen)));
  } else {
    core::CheckedSum<uint64_t> total;
    for (const Part& part : chosen) total.Add(part.size);
    const std::optional<uint64_t> frame_bytes = core::CheckedProduct<uint64_t>(
        dims.d1, dims.d2, core::RawSampleBytes(RawLayout(input, dims).sample));
    const std::optional<int64_t> frame_count =
        total.ok() && frame_bytes && *frame_bytes > 0
            ? core::CheckedCast<int64_t>(total.value() / *frame_bytes)
            : std::nullopt;
    if (!frame_count) {
      return absl::InvalidArgumentError(absl::StrCat("input: ", what, " ", PartNames(chosen),
                                                     " is not a countable number of frames"));
    }
    TOMO_ASSIGN_OR_RETURN(frames, DecodeRawParts(mapped, chosen, input, *frame_count, dims.d1,
                                                 dims.d2, /*whole_frames=*/true));
  }
  if (frames.dims().d1 != dims.d1 || frames.dims().d2 != dims.d2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input: ", what, " ", PartNames(chosen), " frames are ", frames.dims().d1, " x ",
        frames.dims().d2, " (rows x columns), the projections ", dims.d1, " x ", dims.d2));
  }
  return core::MeanFrame(frames, what);
}

core::Hdf5Layout Hdf5LayoutFor(const pb::Hdf5Options& options) {
  switch (options.layout()) {
    case pb::HDF5_LAYOUT_DATA_EXCHANGE:
      return core::Hdf5Layout::kDataExchange;
    case pb::HDF5_LAYOUT_NXTOMO:
      return core::Hdf5Layout::kNxTomo;
    default:
      return core::Hdf5Layout::kAutomatic;
  }
}

core::DetectorCorrectionOptions DetectorCorrectionOptionsFor(const pb::Preprocessing& pre) {
  core::DetectorCorrectionOptions options;
  options.negative_log = pre.negative_log();
  if (pre.has_min_transmission()) {
    options.min_transmission = static_cast<float>(pre.min_transmission());
  }
  options.bad_pixels = !pre.bad_pixels().disabled();
  if (pre.bad_pixels().has_gain_outlier_ratio()) {
    options.gain_outlier_ratio = pre.bad_pixels().gain_outlier_ratio();
  }
  if (pre.bad_pixels().has_max_bad_fraction()) {
    options.max_bad_fraction = pre.bad_pixels().max_bad_fraction();
  }
  if (pre.ring_filter().enabled()) {
    options.ring_filter_window = pre.ring_filter().window() == 0 ? 5 : pre.ring_filter().window();
  }
  return options;
}

// Flat files grouped by the projection views uploaded before them (raw view-row-column or
// TIFF), each group averaged: FLAT_INTERPOLATION_LINEAR_IN_VIEWS.
absl::StatusOr<std::vector<core::TimedFlat>> TimedFlatsOfParts(const core::MappedFile& mapped,
                                                               const std::vector<Part>& parts,
                                                               const pb::ProjectionInput& input,
                                                               const core::Dims3& dims) {
  std::vector<core::TimedFlat> flats;
  int64_t views_before = 0;
  std::vector<Part> group;
  int64_t group_position = -1;
  auto close_group = [&]() -> absl::Status {
    if (group.empty()) return absl::OkStatus();
    std::vector<Part> chosen = group;
    for (Part& part : chosen) part.role = pb::INPUT_ROLE_FLAT_FIELD;
    TOMO_ASSIGN_OR_RETURN(core::Array3D mean, FieldFrame(mapped, chosen, input,
                                                         pb::INPUT_ROLE_FLAT_FIELD, dims));
    flats.push_back({std::move(mean), static_cast<double>(group_position)});
    group.clear();
    return absl::OkStatus();
  };
  const uint64_t frame_bytes =
      static_cast<uint64_t>(dims.d1 * dims.d2) * core::RawSampleBytes(RawLayout(input, dims).sample);
  for (const Part& part : parts) {
    if (part.role == pb::INPUT_ROLE_PROJECTIONS) {
      int64_t views = 0;
      if (input.encoding() == pb::DATA_ENCODING_TIFF) {
        TOMO_ASSIGN_OR_RETURN(core::TiffStackInfo info,
                              core::InspectTiff(mapped.data() + part.offset,
                                                static_cast<size_t>(part.size), part.name));
        views = info.pages;
      } else {
        views = static_cast<int64_t>(part.size / frame_bytes);
      }
      views_before += views;
    } else if (part.role == pb::INPUT_ROLE_FLAT_FIELD) {
      if (views_before != group_position) TOMO_RETURN_IF_ERROR(close_group());
      group_position = views_before;
      group.push_back(part);
    }
  }
  TOMO_RETURN_IF_ERROR(close_group());
  return flats;
}

// NXtomo's flat frames grouped by the projections acquired before them, each averaged.
absl::StatusOr<std::vector<core::TimedFlat>> TimedFlatsOfScan(const core::Hdf5Scan& scan) {
  std::vector<core::TimedFlat> flats;
  const core::Dims3& d = scan.flat_frames.dims();
  const int64_t pixels = d.d1 * d.d2;
  for (size_t first = 0; first < scan.flat_positions.size();) {
    size_t end = first;
    while (end < scan.flat_positions.size() &&
           scan.flat_positions[end] == scan.flat_positions[first]) {
      ++end;
    }
    core::Array3D frames({static_cast<int64_t>(end - first), d.d1, d.d2});
    std::memcpy(frames.data(), scan.flat_frames.data() + static_cast<int64_t>(first) * pixels,
                frames.size_bytes());
    TOMO_ASSIGN_OR_RETURN(core::Array3D mean, core::MeanFrame(frames, "flat field"));
    flats.push_back({std::move(mean), static_cast<double>(scan.flat_positions[first])});
    first = end;
  }
  return flats;
}

}  // namespace

bool InputIsPlainProjections(const ValidatedJob& job) {
  const pb::ProjectionInput& input = job.input;
  // UNSPECIFIED means FLOAT32_LE (the proto's default); dark and flat fields come as files.
  const bool float32_le = input.encoding() == pb::DATA_ENCODING_FLOAT32_LE ||
                          input.encoding() == pb::DATA_ENCODING_UNSPECIFIED;
  return float32_le && input.files().empty() && !input.preprocessing().negative_log() &&
         input.order() != pb::AXIS_ORDER_ROW_VIEW_COLUMN && !job.geometry_from_input_files &&
         !job.center_estimate.has_value() && !input.preprocessing().ring_filter().enabled();
}

absl::StatusOr<JobInput> ResolveJobInput(const ValidatedJob& job, const std::string& input_path) {
  const pb::ProjectionInput& input = job.input;
  JobInput result;
  if (InputIsPlainProjections(job)) {
    // The plain case, line integrals as they are: raw_io's parallel pread path.
    TOMO_ASSIGN_OR_RETURN(result.projections,
                          core::ReadRawFloat32(input_path, core::ProjectionDims(job.request.geometry)));
    return result;
  }
  TOMO_ASSIGN_OR_RETURN(core::MappedFile mapped,
                        MapSpooledInput(input_path, job.input_bytes));
  TOMO_ASSIGN_OR_RETURN(const std::vector<Part> parts, Parts(input, mapped.size()));
  const std::vector<Part> projection_parts = WithRole(parts, pb::INPUT_ROLE_PROJECTIONS);
  if (input.encoding() == pb::DATA_ENCODING_DICOM_CT_PD) {
    std::vector<core::DicomBytes> files;
    for (const Part& part : projection_parts) {
      files.push_back({part.name, mapped.data() + part.offset, static_cast<size_t>(part.size)});
    }
    TOMO_ASSIGN_OR_RETURN(core::DicomCtPdAcquisition scan, core::DecodeDicomCtPd(files));
    result.projections = std::move(scan.projections);
    result.photon_statistics = std::move(scan.photon_statistics);
    result.metadata = std::move(scan.metadata);
    result.geometry = std::move(scan.geometry);
    return result;
  }
  const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
  core::Array3D dark, flat;
  std::vector<core::TimedFlat> timed_flats;
  if (input.encoding() == pb::DATA_ENCODING_HDF5) {
    // The HDF5 file is the spool's first bytes (the spec's validation says so); libhdf5
    // reads it by hyperslabs, never the whole file at once.
    TOMO_RETURN_IF_ERROR(CheckJobInputHeaders(job, input_path));
    // Everything the read below touches, read once in a child process first (the file's
    // bytes are the same, so a file that passed reads the same way here).
    TOMO_RETURN_IF_ERROR(core::ProbeHdf5ScanInChild(input_path, Hdf5LayoutFor(input.hdf5()),
                                                    projection_parts.front().name,
                                                    /*read_frames=*/true));
    TOMO_ASSIGN_OR_RETURN(core::Hdf5Scan scan,
                          core::ReadHdf5Scan(input_path, Hdf5LayoutFor(input.hdf5()),
                                             projection_parts.front().name));
    result.projections = std::move(scan.projections);
    if (scan.dark_frames.size() > 0) {
      TOMO_ASSIGN_OR_RETURN(dark, core::MeanFrame(scan.dark_frames, "dark field"));
    }
    if (scan.flat_frames.size() > 0) {
      TOMO_ASSIGN_OR_RETURN(flat, core::MeanFrame(scan.flat_frames, "flat field"));
    }
    if (input.hdf5().angles_from_file()) {
      result.angles_deg = std::move(scan.angles_deg);
      if (input.hdf5().negate_angles()) {
        for (double& angle : result.angles_deg) angle = -angle;
      }
    }
    if (input.preprocessing().flat_interpolation() == pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS) {
      TOMO_ASSIGN_OR_RETURN(timed_flats, TimedFlatsOfScan(scan));
    }
  } else if (input.encoding() == pb::DATA_ENCODING_TIFF) {
    // Page counts and sizes against the geometry before any page is decoded.
    TOMO_RETURN_IF_ERROR(CheckJobInputHeaders(job, input_path));
    TOMO_ASSIGN_OR_RETURN(result.projections,
                          core::DecodeTiffStack(TiffParts(mapped, projection_parts)));
    if (input.tiff_layout() == pb::TIFF_LAYOUT_SINOGRAMS) {
      // Pages are rows of views x columns: (rows, views, columns) to (views, rows, columns).
      const core::Dims3 pages = result.projections.dims();
      core::Array3D reordered = core::Array3D::Uninitialized({pages.d1, pages.d0, pages.d2});
      for (int64_t r = 0; r < pages.d0; ++r) {
        for (int64_t v = 0; v < pages.d1; ++v) {
          std::memcpy(reordered.data() + (v * pages.d0 + r) * pages.d2,
                      result.projections.data() + (r * pages.d1 + v) * pages.d2,
                      static_cast<size_t>(pages.d2) * sizeof(float));
        }
      }
      result.projections = std::move(reordered);
    }
    TOMO_RETURN_IF_ERROR(MatchesGeometry(
        result.projections.dims(), dims,
        absl::StrCat("TIFF pages of ", PartNames(projection_parts))));
  } else {
    TOMO_ASSIGN_OR_RETURN(result.projections,
                          DecodeRawParts(mapped, projection_parts, input, dims.d0, dims.d1,
                                         dims.d2, /*whole_frames=*/false));
  }
  if (input.encoding() != pb::DATA_ENCODING_HDF5) {
    TOMO_ASSIGN_OR_RETURN(dark, FieldFrame(mapped, parts, input, pb::INPUT_ROLE_DARK_FIELD, dims));
    TOMO_ASSIGN_OR_RETURN(flat, FieldFrame(mapped, parts, input, pb::INPUT_ROLE_FLAT_FIELD, dims));
    if (input.preprocessing().flat_interpolation() == pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS) {
      TOMO_ASSIGN_OR_RETURN(timed_flats, TimedFlatsOfParts(mapped, parts, input, dims));
    }
  }
  core::DetectorMask mask;
  if (const std::vector<Part> masks = WithRole(parts, pb::INPUT_ROLE_BAD_PIXEL_MASK);
      !masks.empty()) {
    TOMO_ASSIGN_OR_RETURN(mask, core::DetectorMask::FromBytes(
                                    mapped.data() + masks[0].offset,
                                    static_cast<size_t>(masks[0].size), dims.d1, dims.d2,
                                    absl::StrCat("input: ", masks[0].name)));
  }
  core::DetectorCorrectionOptions options = DetectorCorrectionOptionsFor(input.preprocessing());
  if (!timed_flats.empty()) options.timed_flats = &timed_flats;
  TOMO_ASSIGN_OR_RETURN(const core::DetectorCorrectionReport report,
                        core::CorrectDetectorReadings(
                            result.projections, dark.size() > 0 ? &dark : nullptr,
                            flat.size() > 0 ? &flat : nullptr, &mask, options));
  result.clamped_transmissions = report.clamped_transmissions;
  if (flat.size() > 0 || !mask.empty() || input.preprocessing().negative_log() ||
      input.preprocessing().ring_filter().enabled()) {
    result.notes.push_back(report.Summary());
  }
  return result;
}

absl::StatusOr<core::ReconstructionRequest> RequestForInput(const ValidatedJob& job,
                                                            const JobInput& input) {
  core::ReconstructionRequest request = job.request;
  UsePhotonStatistics(input.photon_statistics, request.algorithm);
  if (!input.angles_deg.empty()) {
    TOMO_ASSIGN_OR_RETURN(request.geometry, GeometryWith(job, {input.angles_deg, std::nullopt}));
  }
  if (!input.geometry.has_value()) return request;
  const core::VectorGeometry& geometry = *input.geometry;
  // The files' values meet the ranges a spec's would (geometry_ranges.h).
  TOMO_RETURN_IF_ERROR(CheckVectorGeometryRanges(geometry));
  if (absl::Status fits = geometry.CheckAgainstVolume(job.request.volume); !fits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("geometry (from the input files): ", fits.message()));
  }
  request.geometry = geometry;
  return request;
}

absl::Status CheckJobInputHeaders(const ValidatedJob& job, const std::string& input_path) {
  const pb::ProjectionInput& input = job.input;
  const bool dicom = input.encoding() == pb::DATA_ENCODING_DICOM_CT_PD;
  const bool tiff = input.encoding() == pb::DATA_ENCODING_TIFF;
  const bool hdf5 = input.encoding() == pb::DATA_ENCODING_HDF5;
  if (!dicom && !tiff && !hdf5) return absl::OkStatus();
  TOMO_ASSIGN_OR_RETURN(core::MappedFile mapped,
                        MapSpooledInput(input_path, job.input_bytes));
  TOMO_ASSIGN_OR_RETURN(const std::vector<Part> parts, Parts(input, mapped.size()));
  if (hdf5) {
    const std::string& name = parts.front().name;
    // libhdf5 parses the uploaded file in a child first: a crash fails this job, not tomod.
    TOMO_RETURN_IF_ERROR(core::ProbeHdf5ScanInChild(input_path, Hdf5LayoutFor(input.hdf5()),
                                                    name, /*read_frames=*/false));
    TOMO_ASSIGN_OR_RETURN(core::Hdf5ScanInfo info,
                          core::InspectHdf5Scan(input_path, Hdf5LayoutFor(input.hdf5()), name));
    const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
    if (info.projections != dims.d0 || info.rows != dims.d1 || info.columns != dims.d2) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", info.projections_dataset, " holds ", info.projections, " projections of ",
          info.rows, " x ", info.columns, " (rows x columns); the geometry has ", dims.d0,
          " views of ", dims.d1, " x ", dims.d2));
    }
    if (input.hdf5().angles_from_file() && !info.has_angles) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input.hdf5.angles_from_file: ", name, " holds no rotation angles (",
          info.layout == core::Hdf5Layout::kDataExchange ? "/exchange/theta"
                                                         : "<entry>/sample/rotation_angle",
          ")"));
    }
    if (info.darks > 0 && info.flats == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": dark fields without flat fields; T = (I - dark) / (flat - dark) needs both"));
    }
    if (input.preprocessing().flat_interpolation() == pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS &&
        info.flat_times < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input.preprocessing.flat_interpolation: FLAT_INTERPOLATION_LINEAR_IN_VIEWS needs "
          "flat fields taken at two times at least; ", name, " holds ", info.flats,
          " flat frames taken at ", info.flat_times, " time", info.flat_times == 1 ? "" : "s",
          info.layout == core::Hdf5Layout::kDataExchange
              ? " (a Data Exchange file does not say when its flats were taken)"
              : " (NXtomo image keys 1 with projections between them)",
          "; use FLAT_INTERPOLATION_MEAN"));
    }
    return absl::OkStatus();
  }
  if (dicom) {
    std::optional<core::DicomCtPdHeader> first;
    std::string first_name;
    for (const Part& part : WithRole(parts, pb::INPUT_ROLE_PROJECTIONS)) {
      TOMO_ASSIGN_OR_RETURN(core::DicomCtPdHeader header,
                            core::ParseDicomCtPdHeader(mapped.data() + part.offset,
                                                       static_cast<size_t>(part.size), part.name));
      if (!first.has_value()) {
        first = header;
        first_name = part.name;
      } else {
        TOMO_RETURN_IF_ERROR(core::CheckSameDicomCtPdDetector(header.detector, part.name,
                                                              first->detector, first_name));
      }
    }
    return absl::OkStatus();
  }
  const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
  const bool sinograms = input.tiff_layout() == pb::TIFF_LAYOUT_SINOGRAMS;
  int64_t pages = 0;
  for (const Part& part : parts) {
    if (part.role == pb::INPUT_ROLE_BAD_PIXEL_MASK) continue;  // raw bytes, sized by the spec
    TOMO_ASSIGN_OR_RETURN(core::TiffStackInfo info,
                          core::InspectTiff(mapped.data() + part.offset,
                                            static_cast<size_t>(part.size), part.name));
    const bool sinogram_page = sinograms && part.role == pb::INPUT_ROLE_PROJECTIONS;
    const int64_t height = sinogram_page ? dims.d0 : dims.d1;
    if (info.rows != height || info.columns != dims.d2) {
      return absl::InvalidArgumentError(absl::StrCat(
          part.name, ": pages are ", info.rows, " x ", info.columns,
          sinogram_page ? " (views x columns: sinograms), the geometry's "
                        : " (rows x columns), the geometry's detector ",
          height, " x ", dims.d2));
    }
    if (part.role == pb::INPUT_ROLE_PROJECTIONS) pages += info.pages;
  }
  const int64_t expected = sinograms ? dims.d1 : dims.d0;
  if (pages != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.files: ", pages, sinograms ? " TIFF sinogram pages, the geometry has "
                                          : " TIFF projection pages, the geometry has ",
        expected, sinograms ? " detector rows" : " views"));
  }
  return absl::OkStatus();
}

}  // namespace tomo::server
