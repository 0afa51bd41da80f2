// Fuzzes the HDF5 scan reader (libhdf5 beneath it) on an uploaded file's bytes: the layout
// inspection tomod makes before it accepts a job, then, when the projections are small (as
// the job's geometry bounds them before tomod reads), the whole read. libhdf5 opens files by
// name (and cannot open a memfd's /proc/self/fd/N), so the bytes go into one file per
// process under /dev/shm (memory) or $TMPDIR, rewritten for every input and removed at exit.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/io/hdf5_scan_reader.h"
#include "fuzz/fuzz_targets.h"

namespace tomo::fuzz {
namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

// The scratch file, made once per process.
const std::string& ScratchFile() {
  static const std::string path = [] {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                          : tmpdir != nullptr          ? tmpdir
                                                       : "/tmp";
    pattern += "/hdf5_scan_fuzz_XXXXXX";
    const int fd = mkstemp(pattern.data());
    Require(fd >= 0, "mkstemp");
    close(fd);
    static std::string made = pattern;
    std::atexit([] { unlink(made.c_str()); });
    return pattern;
  }();
  return path;
}

bool Refusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kResourceExhausted;
}

}  // namespace

int FuzzHdf5Scan(const uint8_t* data, size_t size) {
  const std::string& path = ScratchFile();
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
  Require(fd >= 0, "open the scratch file");
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    Require(n > 0, "write");
    written += static_cast<size_t>(n);
  }
  close(fd);
  absl::StatusOr<core::Hdf5ScanInfo> info =
      core::InspectHdf5Scan(path, core::Hdf5Layout::kAutomatic, "fuzz.h5");
  Require(info.ok() || Refusal(info.status()),
          "inspect errors are INVALID_ARGUMENT, NOT_FOUND or RESOURCE_EXHAUSTED");
  if (!info.ok()) return 0;
  Require(info->projections >= 1 && info->rows >= 1 && info->columns >= 1,
          "an accepted scan has at least one projection");
  Require(info->rows <= core::kMaxHdf5FrameSide && info->columns <= core::kMaxHdf5FrameSide &&
              info->projections <= core::kMaxHdf5Frames,
          "an accepted scan is within the reader's bounds");
  // tomod reads only what its geometry admits; here: at most 2^20 projection samples.
  if (info->projections * info->rows * info->columns > (int64_t{1} << 20)) return 0;
  absl::StatusOr<core::Hdf5Scan> scan =
      core::ReadHdf5Scan(path, core::Hdf5Layout::kAutomatic, "fuzz.h5", 3);
  Require(scan.ok() || Refusal(scan.status()), "read errors are refusals");
  if (scan.ok()) {
    Require(scan->projections.dims() ==
                core::Dims3{info->projections, info->rows, info->columns},
            "the read matches the inspection");
    Require(scan->flat_frames.dims().d0 == info->flats &&
                scan->dark_frames.dims().d0 == info->darks,
            "flat and dark counts match the inspection");
    Require(scan->angles_deg.empty() ||
                static_cast<int64_t>(scan->angles_deg.size()) == info->projections,
            "one angle per projection");
  }
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzHdf5Scan(data, size);
}
#endif
