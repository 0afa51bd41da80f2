#include "core/io/raw_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/data/dims_check.h"
#include "core/data/finite_values.h"
#include "core/io/durable_file.h"

namespace tomo::core {
namespace {

// The files are little-endian float32 and are read and written by copying bytes, which
// is right only on a little-endian host (every platform we build for).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw_io copies float32 bytes as they are; add byte swapping for this host");
static_assert(sizeof(float) == 4, "float32 I/O needs a 4-byte float");

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;


// Bytes per read call and per thread's turn in ReadRawFloat32.
constexpr uint64_t kReadBlockBytes = uint64_t{64} << 20;

uint64_t ExpectedBytes(const Dims3& dims) {
  return static_cast<uint64_t>(dims.count()) * sizeof(float);
}

absl::Status CheckDims(const Dims3& dims) {
  if (dims.d0 < 0 || dims.d1 < 0 || dims.d2 < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dims ", DimsText(dims), " must not be negative"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Array3D> ReadRawFloat32(const std::string& path, Dims3 dims) {
  if (absl::Status status = CheckDims(dims); !status.ok()) return status;
  File file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int error = errno;
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(error)));
  }
  struct stat info;
  if (fstat(fileno(file.get()), &info) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  }
  // A directory opens for reading too, and has a size that means nothing here.
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  const uint64_t expected = ExpectedBytes(dims);
  if (size != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is ", size, " bytes, expected ",
                                                   expected, " bytes for float32 dims ",
                                                   DimsText(dims)));
  }
  // Every byte is read over: no fill first. Large files are read by several threads in
  // blocks (one thread reads a few GB/s out of the page cache; a tomod job's input is
  // gigabytes).
  Array3D array = Array3D::Uninitialized(dims);
  const int fd = fileno(file.get());
  char* bytes = reinterpret_cast<char*>(array.data());
  const int64_t blocks =
      static_cast<int64_t>((expected + kReadBlockBytes - 1) / kReadBlockBytes);
  std::mutex mu;
  uint64_t short_at = expected;  // the first byte not read, if any
  int read_errno = 0;
  ParallelFor(blocks, [&](int64_t first, int64_t end) {
    for (int64_t b = first; b < end; ++b) {
      uint64_t offset = static_cast<uint64_t>(b) * kReadBlockBytes;
      const uint64_t stop = std::min(expected, offset + kReadBlockBytes);
      while (offset < stop) {
        const ssize_t n = pread(fd, bytes + offset, static_cast<size_t>(stop - offset),
                                static_cast<off_t>(offset));
        if (n <= 0) {
          std::lock_guard<std::mutex> lock(mu);
          if (offset < short_at) {
            short_at = offset;
            read_errno = n < 0 ? errno : 0;
          }
          return;
        }
        offset += static_cast<uint64_t>(n);
      }
    }
  });
  if (short_at < expected) {
    if (read_errno != 0) {
      return absl::ErrnoToStatus(read_errno, absl::StrCat(path, ": read failed at byte ",
                                                          short_at));
    }
    return absl::DataLossError(
        absl::StrCat(path, ": short read, got ", short_at, " of ", expected, " bytes"));
  }
  return array;
}

absl::StatusOr<Array3D> Float32FromBytes(const void* bytes, size_t size_bytes, Dims3 dims) {
  if (absl::Status status = CheckDims(dims); !status.ok()) return status;
  const uint64_t expected = ExpectedBytes(dims);
  if (static_cast<uint64_t>(size_bytes) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("data: ", size_bytes, " bytes, expected ",
                                                   expected, " bytes for float32 dims ",
                                                   DimsText(dims)));
  }
  Array3D array = Array3D::Uninitialized(dims);
  if (size_bytes > 0) ParallelCopy(static_cast<const float*>(bytes), array.size(), array.data());
  const float* values = array.data();
  const int64_t i = FirstNonFiniteIndex(values, array.size());
  if (i >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("data: value at index ", i, " is ",
                                                   std::isnan(values[i]) ? "NaN" : "infinite",
                                                   "; all values must be finite"));
  }
  return array;
}

absl::Status WriteRawFloat32(const std::string& path, const Array3D& array) {
  return WriteFileDurably(
      path, absl::string_view(reinterpret_cast<const char*>(array.data()), array.size_bytes()));
}

}  // namespace tomo::core
