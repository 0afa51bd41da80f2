// PNG previews of a volume: its three central orthogonal slices, 8-bit grey (libpng), for a
// quick look at a job's result (`tomo preview`, the PNG_PREVIEW output).
//
// Slices and their orientation (the patient frame of core/io/patient_frame.h, as viewers
// show it):
//   axial    z = size.z / 2:  columns x (patient's left on the right), rows from +y at the
//            top (anterior) to -y
//   coronal  y = size.y / 2:  columns x as in axial, rows from -z at the top (superior) to +z
//   sagittal x = size.x / 2:  columns from +y on the left (anterior) to -y, rows as coronal
// Pixels are square: a plane whose voxel sizes differ is resampled (nearest voxel) to the
// smaller of its two sizes, so anisotropic volumes keep their proportions; no side grows
// beyond kMaxPreviewSide.
// Grey levels: linear in the window (core/io/display_window.h): the caller's, or the robust
// 1st..99th percentile window of the three slices.
//
//   TOMO_ASSIGN_OR_RETURN(auto names, WritePngPreviews(dir, volume, geometry, std::nullopt));
//   // names: preview_axial.png, preview_coronal.png, preview_sagittal.png
//
// Errors: INVALID_ARGUMENT when the dims differ from the geometry's or a window is empty;
// INTERNAL naming the slice when libpng fails; the durable-file errors. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/display_window.h"

namespace tomo::core {

inline constexpr int64_t kMaxPreviewSide = 4096;

struct GreyImage {
  std::string plane;  // "axial", "coronal" or "sagittal"
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // row-major, row 0 at the top
};

// The three slices, windowed: axial, coronal, sagittal.
absl::StatusOr<std::vector<GreyImage>> RenderCentralSlices(const Array3D& volume,
                                                           const VolumeGeometry& geometry,
                                                           const DisplayWindow& window);

// The bytes of a PNG file of image.
absl::StatusOr<std::string> EncodePng(const GreyImage& image);

// "preview_<plane>.png".
std::string PreviewFileName(const std::string& plane);

// Writes the three PNGs into directory (which must exist); returns their file names in the
// order axial, coronal, sagittal.
absl::StatusOr<std::vector<std::string>> WritePngPreviews(
    const std::string& directory, const Array3D& volume, const VolumeGeometry& geometry,
    const std::optional<DisplayWindow>& window);

}  // namespace tomo::core
