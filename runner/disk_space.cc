#include "runner/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/checked_arithmetic.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

constexpr uint64_t kHeaderBytes = 64 << 10;
constexpr uint64_t kDicomSliceOverheadBytes = 16 << 10;

std::optional<uint64_t> FormatBytes(pb::OutputFormat format, uint64_t x, uint64_t y,
                                    uint64_t z) {
  using core::CheckedAdd;
  using core::CheckedMul;
  using core::CheckedProduct;
  const std::optional<uint64_t> voxels = CheckedProduct<uint64_t>(x, y, z);
  if (!voxels) return std::nullopt;
  const std::optional<uint64_t> float_bytes = CheckedMul<uint64_t>(*voxels, 4);
  if (!float_bytes) return std::nullopt;
  switch (format) {
    case pb::OUTPUT_FORMAT_RAW_FLOAT32:
    case pb::OUTPUT_FORMAT_NIFTI:
    case pb::OUTPUT_FORMAT_METAIMAGE:
      return CheckedAdd<uint64_t>(*float_bytes, kHeaderBytes);
    case pb::OUTPUT_FORMAT_NIFTI_GZ: {
      const std::optional<uint64_t> data = CheckedAdd<uint64_t>(*float_bytes, *voxels / 256);
      return data ? CheckedAdd<uint64_t>(*data, kHeaderBytes) : std::nullopt;
    }
    case pb::OUTPUT_FORMAT_DICOM_CT_SERIES: {
      const std::optional<uint64_t> slices = CheckedMul<uint64_t>(z, kDicomSliceOverheadBytes);
      const std::optional<uint64_t> int16_bytes = CheckedMul<uint64_t>(*voxels, 2);
      if (!slices || !int16_bytes) return std::nullopt;
      const std::optional<uint64_t> series = CheckedAdd<uint64_t>(*int16_bytes, *slices);
      const std::optional<uint64_t> twice = series ? CheckedMul<uint64_t>(*series, 2)
                                                   : std::nullopt;
      return twice ? CheckedAdd<uint64_t>(*twice, kHeaderBytes) : std::nullopt;
    }
    case pb::OUTPUT_FORMAT_PNG_PREVIEW: {
      core::CheckedSum<uint64_t> pixels;
      pixels.Add(x * y);  // each side is at most VolumeGeometry::kMaxSide (fits)
      pixels.Add(y * z);
      pixels.Add(x * z);
      const std::optional<uint64_t> bytes =
          pixels.ok() ? CheckedMul<uint64_t>(pixels.value(), 2) : std::nullopt;
      return bytes ? CheckedAdd<uint64_t>(*bytes, 3 * kHeaderBytes) : std::nullopt;
    }
    default:
      return kHeaderBytes;
  }
}

absl::Status TooLarge(const ValidatedJob& job) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "volume.size: the outputs of a ", job.request.volume.size().x, " x ",
      job.request.volume.size().y, " x ", job.request.volume.size().z,
      " volume do not fit 64 bits of bytes"));
}

}  // namespace

absl::StatusOr<uint64_t> ExpectedOutputBytes(const ValidatedJob& job) {
  const core::Size3 size = job.request.volume.size();
  core::CheckedSum<uint64_t> total;
  for (pb::OutputFormat format : job.outputs) {
    const std::optional<uint64_t> bytes =
        FormatBytes(format, static_cast<uint64_t>(size.x), static_cast<uint64_t>(size.y),
                    static_cast<uint64_t>(size.z));
    if (!bytes || !total.Add(*bytes)) return TooLarge(job);
  }
  return total.value();
}

absl::StatusOr<SpoolNeed> JobSpoolNeed(const ValidatedJob& job) {
  SpoolNeed need;
  need.input_bytes = job.input_bytes;
  absl::StatusOr<uint64_t> outputs = ExpectedOutputBytes(job);
  if (!outputs.ok()) return outputs.status();
  need.output_bytes = *outputs;
  if (!core::CheckedAdd<uint64_t>(need.input_bytes, need.output_bytes)) return TooLarge(job);
  return need;
}

absl::StatusOr<uint64_t> FileSystemFreeBytes(const std::string& path) {
  struct statvfs info = {};
  if (::statvfs(path.c_str(), &info) != 0) {
    return absl::InternalError(absl::StrCat("cannot statvfs ", path, ": ", std::strerror(errno)));
  }
  return core::CheckedMul<uint64_t>(info.f_bavail, info.f_frsize).value_or(UINT64_MAX);
}

}  // namespace tomo::server
