// WriteCentralSlicesPng: the three central slices (axial, coronal, sagittal:
// core/io/png_preview.h, square pixels) of each volume side by side, one volume per row of
// one PNG, all in one display window, so that methods can be compared by eye (icd-bench's
// ICD / FDK / SIRT / CGLS figure, icd-noise-study's stripes).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/png_preview.h"

namespace tomo::bench {

absl::Status WriteCentralSlicesPng(const std::string& path,
                                   const std::vector<const core::Array3D*>& volumes,
                                   const core::VolumeGeometry& geometry,
                                   const core::DisplayWindow& window);

}  // namespace tomo::bench
