#include "core/io/raw_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/checked_arithmetic.h"
#include "core/base/parallel_for.h"
#include "core/data/dims_check.h"
#include "core/data/finite_values.h"

namespace tomo::core {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw_stream assumes a little-endian host when it swaps bytes");

uint16_t LoadUint16(const unsigned char* p, bool big_endian) {
  return big_endian ? static_cast<uint16_t>((p[0] << 8) | p[1])
                    : static_cast<uint16_t>(p[0] | (p[1] << 8));
}

float LoadFloat32(const unsigned char* p, bool big_endian) {
  uint32_t bits;
  if (big_endian) {
    bits = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  } else {
    std::memcpy(&bits, p, sizeof(bits));
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

int64_t RawSampleBytes(RawSampleType sample) { return sample == RawSampleType::kUint16 ? 2 : 4; }

uint64_t RawStreamBytes(const RawStreamLayout& layout) {
  const Dims3& d = layout.dims;
  if (d.d0 < 0 || d.d1 < 0 || d.d2 < 0) return 0;
  return CheckedProduct<uint64_t>(d.d0, d.d1, d.d2, RawSampleBytes(layout.sample))
      .value_or(kRawStreamBytesOverflow);
}

std::string RawLayoutText(const RawStreamLayout& layout) {
  return absl::StrCat(layout.sample == RawSampleType::kUint16 ? "uint16" : "float32",
                      layout.byte_order == RawByteOrder::kBigEndian ? " big-endian"
                                                                    : " little-endian",
                      layout.order == RawAxisOrder::kRowViewColumn ? " row-view-column"
                                                                   : " view-row-column");
}

absl::StatusOr<Array3D> DecodeRawStream(const void* bytes, size_t size_bytes,
                                        const RawStreamLayout& layout,
                                        absl::string_view source_name) {
  const Dims3& dims = layout.dims;
  if (dims.d0 < 0 || dims.d1 < 0 || dims.d2 < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": dims ", DimsText(dims), " must not be negative"));
  }
  const uint64_t expected = RawStreamBytes(layout);
  if (expected == kRawStreamBytesOverflow) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": dims ", DimsText(dims), " x ", RawSampleBytes(layout.sample),
        " bytes do not fit 64 bits"));
  }
  if (static_cast<uint64_t>(size_bytes) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": ", size_bytes, " bytes, expected ", expected, " bytes for ",
        RawLayoutText(layout), " (views, rows, columns) = ", DimsText(dims)));
  }
  Array3D array = Array3D::Uninitialized(dims);
  if (array.size() == 0) return array;
  const auto* in = static_cast<const unsigned char*>(bytes);
  const bool big_endian = layout.byte_order == RawByteOrder::kBigEndian;
  const bool uint16 = layout.sample == RawSampleType::kUint16;
  const int64_t sample_bytes = RawSampleBytes(layout.sample);
  const bool row_major_views = layout.order == RawAxisOrder::kRowViewColumn;
  // One task per (view, row) line of columns; each line is contiguous in both orders.
  const int64_t lines = dims.d0 * dims.d1;
  ParallelFor(lines, [&](int64_t first, int64_t end) {
    for (int64_t line = first; line < end; ++line) {
      const int64_t view = line / dims.d1;
      const int64_t row = line % dims.d1;
      const int64_t stored_line = row_major_views ? row * dims.d0 + view : line;
      const unsigned char* source = in + stored_line * dims.d2 * sample_bytes;
      float* to = array.data() + line * dims.d2;
      for (int64_t c = 0; c < dims.d2; ++c) {
        to[c] = uint16 ? static_cast<float>(LoadUint16(source + c * 2, big_endian))
                       : LoadFloat32(source + c * 4, big_endian);
      }
    }
  });
  if (!uint16) {
    const float* values = array.data();
    const int64_t i = FirstNonFiniteIndex(values, array.size());  // parallel for large arrays
    if (i >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": float32 value at (view ", i / (dims.d1 * dims.d2), ", row ",
          (i / dims.d2) % dims.d1, ", column ", i % dims.d2, ") is ",
          std::isnan(values[i]) ? "NaN" : "infinite", "; values must be finite"));
    }
  }
  return array;
}

absl::StatusOr<Array3D> ReadRawStream(const std::string& path, uint64_t offset,
                                      uint64_t size_bytes, const RawStreamLayout& layout,
                                      absl::string_view source_name) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(error)));
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(size_bytes));
  uint64_t done = 0;
  while (done < size_bytes) {
    const ssize_t n = ::pread(fd, bytes.data() + done, static_cast<size_t>(size_bytes - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : 0;
      ::close(fd);
      if (error != 0) {
        return absl::ErrnoToStatus(error, absl::StrCat(path, ": read failed at byte ",
                                                       offset + done));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": ", path, " ends at byte ", offset + done, ", expected ", size_bytes,
          " bytes from byte ", offset));
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return DecodeRawStream(bytes.data(), bytes.size(), layout, source_name);
}

}  // namespace tomo::core
