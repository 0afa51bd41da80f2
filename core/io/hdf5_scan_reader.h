// Reading a tomography scan from an HDF5 file (libhdf5, the C API): projections, flat and
// dark fields and rotation angles, in either of the two layouts measured data comes in.
//
//   Data Exchange (APS; tomopy, dxchange):
//     /exchange/data        (projections, rows, columns)
//     /exchange/data_white  (flats, rows, columns)      optional
//     /exchange/data_dark   (darks, rows, columns)      optional
//     /exchange/theta       (projections)               optional; degrees unless its
//                                                       "units" attribute says rad/radians
//   NeXus NXtomo:
//     <entry>/instrument/detector/data       (frames, rows, columns)
//     <entry>/instrument/detector/image_key  (frames): 0 projection, 1 flat, 2 dark,
//                                             3 invalid (skipped)
//     <entry>/sample/rotation_angle          (frames)   optional; units as above
//   <entry> is the first group of the root holding instrument/detector/data ("entry",
//   "entry0000", ...).
//
// Any integer or floating-point sample type; values are converted to float32 by libhdf5.
// Frames are read a block of views at a time (hyperslabs), so the file's bytes are never
// held in memory beside the projections: a file larger than memory streams through, and
// only the float32 projections the reconstruction needs are kept. Each flat frame's
// position in the acquisition (how many projections were taken before it) is kept, so that
// flats taken before and after the scan can be interpolated per view
// (core/preprocessing/flat_normalisation.h).
//
// Thread-safe when libhdf5 is (Debian's is built thread-safe). libhdf5's error stack is not
// printed; errors are INVALID_ARGUMENT naming the file and the dataset ("scan.h5:
// /exchange/data is 2-dimensional; projections are (views, rows, columns)"), NOT_FOUND when
// the file cannot be opened as HDF5 or the layout's datasets are missing.
//
// The file is untrusted (an upload): every number read from it is bounded before anything
// is sized by it, and a violation is INVALID_ARGUMENT naming the dataset, the value and the
// limit: at most kMaxHdf5Frames frames (or values of a 1D dataset), rows and columns at
// most kMaxHdf5FrameSide, flat and dark frames each at most Hdf5ReferenceFrameLimit
// (projections), the attribute "units" at most 256 bytes (longer: not radians). The read
// itself holds at most kMaxHdf5Samples samples (RESOURCE_EXHAUSTED above it, and when the
// memory cannot be had). Callers bound the projections further against the job's geometry
// (InspectHdf5Scan first) before ReadHdf5Scan. libhdf5 itself parses the file: tomod runs
// that first in a child process (ProbeHdf5ScanInChild), and fuzz/hdf5_scan_fuzzer.cc
// fuzzes the path.
//
//   TOMO_ASSIGN_OR_RETURN(Hdf5ScanInfo info, InspectHdf5Scan(path, Hdf5Layout::kAutomatic));
//   TOMO_ASSIGN_OR_RETURN(Hdf5Scan scan, ReadHdf5Scan(path, Hdf5Layout::kAutomatic));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/data/array3d.h"

namespace tomo::core {

constexpr int64_t kMaxHdf5Frames = int64_t{1} << 22;
constexpr int64_t kMaxHdf5FrameSide = 65536;
constexpr int64_t kMinReferenceFrameLimit = 256;
constexpr int64_t kMaxHdf5Samples = int64_t{1} << 36;  // 256 GiB of float32
// The most flat (or dark) frames a scan of `projections` projections may hold.
int64_t Hdf5ReferenceFrameLimit(int64_t projections);

enum class Hdf5Layout {
  kAutomatic,     // Data Exchange when /exchange/data exists, else NXtomo
  kDataExchange,
  kNxTomo,
};

struct Hdf5ScanInfo {
  Hdf5Layout layout = Hdf5Layout::kAutomatic;  // the one found
  int64_t projections = 0, rows = 0, columns = 0;
  int64_t flats = 0, darks = 0;
  // How many different times the flats were taken at (runs of flat frames with projections
  // between them; NXtomo only: a Data Exchange file's flats count as one time).
  int64_t flat_times = 0;
  bool has_angles = false;
  std::string projections_dataset;  // its path in the file, for messages
};

struct Hdf5Scan {
  Hdf5ScanInfo info;
  Array3D projections;   // (projections, rows, columns), the raw readings as float32
  Array3D flat_frames;   // (flats, rows, columns); empty when none
  Array3D dark_frames;   // (darks, rows, columns); empty when none
  // For each flat frame, the projections acquired before it (0: before the scan,
  // info.projections: after it). Data Exchange does not say: all 0.
  std::vector<int64_t> flat_positions;
  std::vector<double> angles_deg;  // one per projection; empty when the file has none
};

// The layout and shapes, from the file's metadata only (no sample read but the NXtomo
// image keys). name is the file's name for messages.
absl::StatusOr<Hdf5ScanInfo> InspectHdf5Scan(const std::string& path, Hdf5Layout layout,
                                             const std::string& name);

// The whole scan. views_per_read bounds each hyperslab read (and the conversion buffer).
absl::StatusOr<Hdf5Scan> ReadHdf5Scan(const std::string& path, Hdf5Layout layout,
                                      const std::string& name, int64_t views_per_read = 64);

// libhdf5 1.10 is not robust against hostile files (the fuzzer crashed it in its metadata
// cache and its type conversions; the checks above stop the cases found, not the class).
// This runs InspectHdf5Scan's parse (read_frames false) or everything ReadHdf5Scan reads,
// one frame at a time and kept nowhere (read_frames true), in a forked child process and
// returns its status: a crash inside libhdf5 kills the child only and comes back as
// INVALID_ARGUMENT naming the file and the signal. libhdf5 does the same work again on the
// same bytes when the caller then reads in this process, so a file that passed reads
// safely. The calls here serialise on one mutex, held across fork() so that no thread is
// inside libhdf5 then. A child that has not answered within `timeout` (zero: 60 s plus a
// second per 32 MB of the file, far beyond what reading it takes) is killed, and the file
// refused with DEADLINE_EXCEEDED: a file that makes libhdf5 loop forever does not hold its
// job (or the worker) forever.
absl::Status ProbeHdf5ScanInChild(const std::string& path, Hdf5Layout layout,
                                  const std::string& name, bool read_frames,
                                  absl::Duration timeout = absl::ZeroDuration());

}  // namespace tomo::core
