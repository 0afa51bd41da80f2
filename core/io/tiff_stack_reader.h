// TIFF stacks as micro-CT and synchrotron detectors write them: one projection per page
// of a multi-page TIFF, or one per file, or several multi-page files one after another.
// Every page must be one grey sample per pixel of 16-bit unsigned integers or 32-bit IEEE
// floats (SampleFormat), in strips (any compression libtiff decodes); each page becomes one
// view (rows = ImageLength, columns = ImageWidth), in page order, files in the order given.
//
// Parsing is from memory through libtiff's client I/O (a spooled upload holds the files
// back to back, and the fuzz target feeds bytes), with libtiff's error messages collected
// per open file (TIFFOpenOptions handlers, no global handler), never printed.
//
// Errors: INVALID_ARGUMENT naming the file and the page, e.g.
//   "stack_0001.tif: page 3 is 512 x 600 (rows x columns), the first page is 512 x 640"
//   "a.tif: page 0: BitsPerSample 8 / SampleFormat 1 is not supported; expected 16-bit
//    unsigned integers or 32-bit floats"
//   "b.tif: not a TIFF file (libtiff: Not a TIFF file, bad magic number 0 (0x0))"
// NOT_FOUND for a path that cannot be opened.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D views, ReadTiffStackFiles({"p0.tif", "p1.tif"}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"

namespace tomo::core {

// What a TIFF file holds, from its directories only (no pixel is decoded).
struct TiffStackInfo {
  int64_t pages = 0;
  int64_t rows = 0;
  int64_t columns = 0;
  int bits_per_sample = 0;  // 16 or 32
};

// Upper bound on pages per file and on rows x columns of a page (guards the allocation a
// hostile header would ask for).
inline constexpr int64_t kMaxTiffPages = 1 << 20;
inline constexpr int64_t kMaxTiffPagePixels = int64_t{1} << 28;

// Checks every directory (size, sample format, layout, and that the page's pixels fit in
// 4096 times its stored strip bytes, so that a forged header cannot make us allocate much
// more than the file holds) of one file in memory.
absl::StatusOr<TiffStackInfo> InspectTiff(const void* bytes, size_t size_bytes,
                                          absl::string_view name);

// Decodes every page of one file in memory into (pages, rows, columns).
absl::StatusOr<Array3D> DecodeTiff(const void* bytes, size_t size_bytes, absl::string_view name);

// One file in memory each; all pages of all files stacked as views. INVALID_ARGUMENT when
// the list is empty or a page's size differs from the first page's (naming both).
struct TiffBytes {
  std::string name;
  const void* bytes = nullptr;
  size_t size_bytes = 0;
};
absl::StatusOr<Array3D> DecodeTiffStack(const std::vector<TiffBytes>& files);

// The same from files on disk.
absl::StatusOr<Array3D> ReadTiffStackFiles(const std::vector<std::string>& paths);

}  // namespace tomo::core
