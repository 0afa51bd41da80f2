#include "core/io/png_preview.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/io/durable_file.h"

namespace tomo::core {
namespace {

// Output pixels along an axis of n voxels of size `voxel` shown at pixel size `pixel`.
int64_t PixelCount(int64_t n, double voxel, double pixel) {
  const int64_t count = std::max<int64_t>(1, std::llround(static_cast<double>(n) * voxel / pixel));
  return std::min(count, kMaxPreviewSide);
}

// The voxel index under output pixel p of count pixels spanning n voxels (nearest).
int64_t VoxelUnder(int64_t p, int64_t count, int64_t n) {
  const int64_t i = static_cast<int64_t>((static_cast<double>(p) + 0.5) *
                                         static_cast<double>(n) / static_cast<double>(count));
  return std::clamp<int64_t>(i, 0, n - 1);
}

// One plane: value(column index, row index) over columns x rows voxels, with the voxel
// sizes along columns and rows.
template <typename Value>
GreyImage Render(std::string plane, int64_t columns, int64_t rows, double column_mm,
                 double row_mm, const DisplayWindow& window, Value value) {
  const double pixel = std::min(column_mm, row_mm);
  GreyImage image;
  image.plane = std::move(plane);
  image.width = PixelCount(columns, column_mm, pixel);
  image.height = PixelCount(rows, row_mm, pixel);
  image.pixels.resize(static_cast<size_t>(image.width * image.height));
  for (int64_t r = 0; r < image.height; ++r) {
    const int64_t row = VoxelUnder(r, image.height, rows);
    for (int64_t c = 0; c < image.width; ++c) {
      image.pixels[static_cast<size_t>(r * image.width + c)] =
          window.Grey(value(VoxelUnder(c, image.width, columns), row));
    }
  }
  return image;
}

void WriteToString(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data),
                                                         length);
}
void NoFlush(png_structp) {}

}  // namespace

absl::StatusOr<std::vector<GreyImage>> RenderCentralSlices(const Array3D& volume,
                                                           const VolumeGeometry& geometry,
                                                           const DisplayWindow& window) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("preview", volume.dims(), geometry.dims(), "(z, y, x)"));
  if (!(window.upper > window.lower) || !std::isfinite(window.lower) ||
      !std::isfinite(window.upper)) {
    return absl::InvalidArgumentError(absl::StrCat("preview window [", window.lower, ", ",
                                                   window.upper,
                                                   "]: upper must be finite and above lower"));
  }
  const Size3& n = geometry.size();
  const Vec3& mm = geometry.voxel_size_mm();
  const int64_t cz = n.z / 2, cy = n.y / 2, cx = n.x / 2;
  std::vector<GreyImage> images;
  images.push_back(Render("axial", n.x, n.y, mm.x, mm.y, window, [&](int64_t c, int64_t r) {
    return volume.at(cz, n.y - 1 - r, c);
  }));
  images.push_back(Render("coronal", n.x, n.z, mm.x, mm.z, window, [&](int64_t c, int64_t r) {
    return volume.at(r, cy, c);
  }));
  images.push_back(Render("sagittal", n.y, n.z, mm.y, mm.z, window, [&](int64_t c, int64_t r) {
    return volume.at(r, n.y - 1 - c, cx);
  }));
  return images;
}

absl::StatusOr<std::string> EncodePng(const GreyImage& image) {
  std::string bytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return absl::InternalError("libpng: cannot create a write struct");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return absl::InternalError("libpng: cannot create an info struct");
  }
  // libpng reports errors by longjmp: nothing with a destructor may live between here and
  // the calls below (the rows are plain pointers into image.pixels).
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return absl::InternalError(absl::StrCat("libpng could not encode the ", image.plane,
                                            " preview"));
  }
  png_set_write_fn(png, &bytes, WriteToString, NoFlush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t r = 0; r < image.height; ++r) {
    png_write_row(png, const_cast<png_bytep>(image.pixels.data() + r * image.width));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return bytes;
}

std::string PreviewFileName(const std::string& plane) {
  return absl::StrCat("preview_", plane, ".png");
}

absl::StatusOr<std::vector<std::string>> WritePngPreviews(
    const std::string& directory, const Array3D& volume, const VolumeGeometry& geometry,
    const std::optional<DisplayWindow>& window) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("preview", volume.dims(), geometry.dims(), "(z, y, x)"));
  const DisplayWindow used = window.has_value() ? *window : RobustDisplayWindow(volume);
  TOMO_ASSIGN_OR_RETURN(std::vector<GreyImage> images,
                        RenderCentralSlices(volume, geometry, used));
  std::vector<std::string> names;
  for (const GreyImage& image : images) {
    TOMO_ASSIGN_OR_RETURN(std::string bytes, EncodePng(image));
    const std::string name = PreviewFileName(image.plane);
    TOMO_RETURN_IF_ERROR(
        WriteFileDurably((std::filesystem::path(directory) / name).string(), bytes));
    names.push_back(name);
  }
  return names;
}

}  // namespace tomo::core
