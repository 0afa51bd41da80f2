#include "core/io/tiff_stack_reader.h"

#include <tiffio.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/mapped_file.h"

namespace tomo::core {
namespace {

// Largest single allocation libtiff may make while decoding one file (a strip buffer);
// bounds what a forged StripByteCounts can ask for.
constexpr tmsize_t kMaxLibtiffAllocationBytes = tmsize_t{1} << 30;
// The most a page's pixels may outgrow its stored strip bytes: deflate and LZW reach about
// 1000:1 on constant data, so 4096 leaves room while bounding what a forged header can
// make us allocate (4096 times the file's size).
constexpr uint64_t kMaxCompressionRatio = 4096;

// The bytes of one file and a read position: libtiff's client I/O over memory.
struct MemoryFile {
  const unsigned char* data = nullptr;
  uint64_t size = 0;
  uint64_t position = 0;
  std::string first_error;  // libtiff's first error message, for ours
};

tmsize_t ReadProc(thandle_t handle, void* buffer, tmsize_t count) {
  auto* file = static_cast<MemoryFile*>(handle);
  if (count <= 0 || file->position >= file->size) return 0;
  const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(count), file->size - file->position);
  std::memcpy(buffer, file->data + file->position, n);
  file->position += n;
  return static_cast<tmsize_t>(n);
}
tmsize_t WriteProc(thandle_t, void*, tmsize_t) { return 0; }
toff_t SeekProc(thandle_t handle, toff_t offset, int whence) {
  auto* file = static_cast<MemoryFile*>(handle);
  uint64_t base = 0;
  if (whence == SEEK_CUR) base = file->position;
  if (whence == SEEK_END) base = file->size;
  // Positions past the end are allowed (reads there return nothing), as for files.
  file->position = base + offset;
  return file->position;
}
int CloseProc(thandle_t) { return 0; }
toff_t SizeProc(thandle_t handle) { return static_cast<MemoryFile*>(handle)->size; }
int MapProc(thandle_t, void**, toff_t*) { return 0; }
void UnmapProc(thandle_t, void*, toff_t) {}

int CollectError(TIFF*, void* user_data, const char* module, const char* format, va_list args) {
  auto* file = static_cast<MemoryFile*>(user_data);
  if (file->first_error.empty()) {
    char message[512];
    std::vsnprintf(message, sizeof(message), format, args);
    file->first_error = absl::StrCat(module != nullptr ? module : "", ": ", message);
  }
  return 1;  // handled: nothing reaches libtiff's global handler or stderr
}
int IgnoreWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

struct TiffCloser {
  void operator()(TIFF* tiff) const { TIFFClose(tiff); }
};
using TiffHandle = std::unique_ptr<TIFF, TiffCloser>;

struct OptionsFree {
  void operator()(TIFFOpenOptions* options) const { TIFFOpenOptionsFree(options); }
};

absl::StatusOr<TiffHandle> Open(MemoryFile& file, absl::string_view name) {
  std::unique_ptr<TIFFOpenOptions, OptionsFree> options(TIFFOpenOptionsAlloc());
  TIFFOpenOptionsSetMaxSingleMemAlloc(options.get(), kMaxLibtiffAllocationBytes);
  TIFFOpenOptionsSetErrorHandlerExtR(options.get(), CollectError, &file);
  TIFFOpenOptionsSetWarningHandlerExtR(options.get(), IgnoreWarning, &file);
  const std::string name_text(name);
  // "r": read; "m": never memory-map (the client I/O has no map).
  TIFF* tiff = TIFFClientOpenExt(name_text.c_str(), "rm", &file, ReadProc, WriteProc, SeekProc,
                                 CloseProc, SizeProc, MapProc, UnmapProc, options.get());
  if (tiff == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a readable TIFF file (libtiff: ", file.first_error, ")"));
  }
  return TiffHandle(tiff);
}

struct PageShape {
  int64_t rows = 0, columns = 0;
  int bits = 0;
};

// The current directory's shape, checked: one sample of uint16 or float32, in strips.
absl::StatusOr<PageShape> CheckPage(TIFF* tiff, absl::string_view name, int64_t page) {
  uint32_t width = 0, length = 0;
  uint16_t bits = 0, samples = 0, format = 0, planar = 0;
  if (TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width) != 1 ||
      TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &length) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": page ", page, ": ImageWidth or ImageLength (tags 256, 257) missing"));
  }
  TIFFGetFieldDefaulted(tiff, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_PLANARCONFIG, &planar);
  if (width < 1 || length < 1 ||
      static_cast<int64_t>(width) * static_cast<int64_t>(length) > kMaxTiffPagePixels) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": page ", page, " is ", length, " x ",
                                                   width, " (rows x columns); pages must have "
                                                   "1 to ", kMaxTiffPagePixels, " pixels"));
  }
  if (samples != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": page ", page, ": SamplesPerPixel ", samples,
        " is not supported; projections are one grey sample per pixel"));
  }
  const bool uint16 = bits == 16 && format == SAMPLEFORMAT_UINT;
  const bool float32 = bits == 32 && format == SAMPLEFORMAT_IEEEFP;
  if (!uint16 && !float32) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": page ", page, ": BitsPerSample ", bits, " / SampleFormat ", format,
        " is not supported; expected 16-bit unsigned integers (SampleFormat 1) or 32-bit "
        "floats (SampleFormat 3)"));
  }
  if (TIFFIsTiled(tiff)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": page ", page, " is tiled; only strip-organised TIFF pages are supported"));
  }
  // A few bytes may claim a huge page: the pixels must come from the strips' stored bytes,
  // expanded at most kMaxCompressionRatio times, before anything is allocated for them.
  const uint64_t* strip_bytes = nullptr;
  uint64_t stored = 0;
  if (TIFFGetField(tiff, TIFFTAG_STRIPBYTECOUNTS, &strip_bytes) == 1 && strip_bytes != nullptr) {
    const uint32_t strips = TIFFNumberOfStrips(tiff);
    for (uint32_t i = 0; i < strips; ++i) stored += strip_bytes[i];
  }
  const uint64_t decoded = static_cast<uint64_t>(width) * length * (bits / 8);
  if (decoded > kMaxCompressionRatio * stored) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": page ", page, " is ", length, " x ", width, " (", decoded,
        " bytes) but its strips hold ", stored, " bytes (StripByteCounts, tag 279); more than ",
        kMaxCompressionRatio, " times that is not a plausible compression"));
  }
  return PageShape{static_cast<int64_t>(length), static_cast<int64_t>(width), bits};
}

std::string ShapeText(const PageShape& shape) {
  return absl::StrCat(shape.rows, " x ", shape.columns, " (rows x columns)");
}

// Visits every directory: check(page, shape) for each, then decode(page, shape) when asked.
template <typename PageFn>
absl::Status ForEachPage(const void* bytes, size_t size_bytes, absl::string_view name,
                         PageFn&& on_page) {
  MemoryFile file;
  file.data = static_cast<const unsigned char*>(bytes);
  file.size = size_bytes;
  TOMO_ASSIGN_OR_RETURN(TiffHandle tiff, Open(file, name));
  int64_t page = 0;
  do {
    if (page >= kMaxTiffPages) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": more than ", kMaxTiffPages, " pages"));
    }
    TOMO_ASSIGN_OR_RETURN(PageShape shape, CheckPage(tiff.get(), name, page));
    TOMO_RETURN_IF_ERROR(on_page(tiff.get(), file, page, shape));
    ++page;
  } while (TIFFReadDirectory(tiff.get()) == 1);
  if (!file.first_error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": after page ", page - 1, ": corrupt directory (libtiff: ", file.first_error, ")"));
  }
  return absl::OkStatus();
}

// Decodes the current page into `to` (rows x columns floats).
absl::Status DecodePage(TIFF* tiff, MemoryFile& file, absl::string_view name, int64_t page,
                        const PageShape& shape, float* to) {
  const tmsize_t line_bytes = TIFFScanlineSize(tiff);
  const int64_t sample_bytes = shape.bits / 8;
  if (line_bytes != shape.columns * sample_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": page ", page, ": scanline of ",
                                                   line_bytes, " bytes, expected ",
                                                   shape.columns * sample_bytes));
  }
  std::vector<unsigned char> line(static_cast<size_t>(line_bytes));
  for (int64_t r = 0; r < shape.rows; ++r) {
    if (TIFFReadScanline(tiff, line.data(), static_cast<uint32_t>(r), 0) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": page ", page, ": row ", r,
                                                     " cannot be decoded (libtiff: ",
                                                     file.first_error, ")"));
    }
    float* out = to + r * shape.columns;
    if (shape.bits == 16) {
      for (int64_t c = 0; c < shape.columns; ++c) {
        uint16_t value;
        std::memcpy(&value, line.data() + 2 * c, 2);  // libtiff gives host byte order
        out[c] = static_cast<float>(value);
      }
    } else {
      std::memcpy(out, line.data(), static_cast<size_t>(line_bytes));
      for (int64_t c = 0; c < shape.columns; ++c) {
        if (!std::isfinite(out[c])) {
          return absl::InvalidArgumentError(absl::StrCat(
              name, ": page ", page, ": value at (row ", r, ", column ", c, ") is ",
              std::isnan(out[c]) ? "NaN" : "infinite", "; values must be finite"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SameShape(absl::string_view name, int64_t page, const PageShape& shape,
                       const PageShape& first, absl::string_view first_where) {
  if (shape.rows == first.rows && shape.columns == first.columns) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, ": page ", page, " is ", ShapeText(shape),
                                                 ", ", first_where, " is ", ShapeText(first),
                                                 "; all pages must have the same size"));
}

}  // namespace

absl::StatusOr<TiffStackInfo> InspectTiff(const void* bytes, size_t size_bytes,
                                          absl::string_view name) {
  TiffStackInfo info;
  PageShape first;
  TOMO_RETURN_IF_ERROR(ForEachPage(
      bytes, size_bytes, name,
      [&](TIFF*, MemoryFile&, int64_t page, const PageShape& shape) -> absl::Status {
        if (page == 0) {
          first = shape;
        } else {
          TOMO_RETURN_IF_ERROR(SameShape(name, page, shape, first, "page 0"));
        }
        ++info.pages;
        return absl::OkStatus();
      }));
  info.rows = first.rows;
  info.columns = first.columns;
  info.bits_per_sample = first.bits;
  return info;
}

absl::StatusOr<Array3D> DecodeTiff(const void* bytes, size_t size_bytes, absl::string_view name) {
  return DecodeTiffStack({TiffBytes{std::string(name), bytes, size_bytes}});
}

absl::StatusOr<Array3D> DecodeTiffStack(const std::vector<TiffBytes>& files) {
  if (files.empty()) return absl::InvalidArgumentError("TIFF stack: no files");
  // Pass 1: shapes and page counts (directories only), so that the array is allocated once.
  int64_t views = 0;
  PageShape first;
  for (size_t f = 0; f < files.size(); ++f) {
    TOMO_ASSIGN_OR_RETURN(TiffStackInfo info,
                          InspectTiff(files[f].bytes, files[f].size_bytes, files[f].name));
    const PageShape shape{info.rows, info.columns, info.bits_per_sample};
    if (f == 0) {
      first = shape;
    } else {
      TOMO_RETURN_IF_ERROR(SameShape(files[f].name, 0, shape, first,
                                     absl::StrCat("page 0 of ", files[0].name)));
    }
    views += info.pages;
    if (views > kMaxTiffPages) {
      return absl::InvalidArgumentError(
          absl::StrCat("TIFF stack: more than ", kMaxTiffPages, " pages in all"));
    }
  }
  Array3D stack = Array3D::Uninitialized({views, first.rows, first.columns});
  int64_t view = 0;
  for (const TiffBytes& file : files) {
    TOMO_RETURN_IF_ERROR(ForEachPage(
        file.bytes, file.size_bytes, file.name,
        [&](TIFF* tiff, MemoryFile& memory, int64_t page, const PageShape& shape) {
          // The bytes are the ones inspected above; a second look that differs is a bug.
          if (view >= views) {
            return absl::InternalError(absl::StrCat(file.name, ": more pages than inspected"));
          }
          return DecodePage(tiff, memory, file.name, page, shape,
                            stack.data() + view++ * first.rows * first.columns);
        }));
  }
  return stack;
}

absl::StatusOr<Array3D> ReadTiffStackFiles(const std::vector<std::string>& paths) {
  std::vector<MappedFile> mapped;
  std::vector<TiffBytes> files;
  for (const std::string& path : paths) {
    TOMO_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    files.push_back({path, file.data(), file.size()});
    mapped.push_back(std::move(file));
  }
  return DecodeTiffStack(files);
}

}  // namespace tomo::core
