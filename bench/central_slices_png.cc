#include "bench/central_slices_png.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tomo::bench {

absl::Status WriteCentralSlicesPng(const std::string& path,
                                   const std::vector<const core::Array3D*>& volumes,
                                   const core::VolumeGeometry& geometry,
                                   const core::DisplayWindow& window) {
  constexpr int64_t kGap = 4;                      // black pixels between slices and rows
  std::vector<std::vector<core::GreyImage>> rows;
  int64_t width = 0, height = 0;
  for (const core::Array3D* v : volumes) {
    auto slices = core::RenderCentralSlices(*v, geometry, window);
    if (!slices.ok()) return slices.status();
    int64_t row_width = 0, row_height = 0;
    for (const core::GreyImage& image : *slices) {
      row_width += image.width + kGap;
      row_height = std::max(row_height, image.height);
    }
    width = std::max(width, row_width);
    height += row_height + kGap;
    rows.push_back(std::move(*slices));
  }
  core::GreyImage all;
  all.plane = "axial";
  all.width = width;
  all.height = height;
  all.pixels.assign(static_cast<size_t>(width * height), 0);
  int64_t y0 = 0;
  for (const std::vector<core::GreyImage>& row : rows) {
    int64_t x0 = 0, row_height = 0;
    for (const core::GreyImage& image : row) {
      for (int64_t y = 0; y < image.height; ++y) {
        for (int64_t x = 0; x < image.width; ++x) {
          all.pixels[static_cast<size_t>((y0 + y) * width + x0 + x)] =
              image.pixels[static_cast<size_t>(y * image.width + x)];
        }
      }
      x0 += image.width + kGap;
      row_height = std::max(row_height, image.height);
    }
    y0 += row_height + kGap;
  }
  auto png = core::EncodePng(all);
  if (!png.ok()) return png.status();
  std::ofstream out(path, std::ios::binary);
  out.write(png->data(), static_cast<std::streamsize>(png->size()));
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

}  // namespace tomo::bench
