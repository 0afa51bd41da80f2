// Raw float32 volumes with a JSON sidecar that says what the bytes are: the raw file is
// core/io/raw_io.h's (little-endian float32, z-y-x, x fastest, no header), the sidecar
// names it and gives everything needed to place it, so that no reader has to guess:
//
//   {
//     "data_file": "volume.raw", "element_type": "float32", "byte_order": "little_endian",
//     "layout": "z-y-x, x fastest", "units": "1/mm",
//     "size": [nx, ny, nz], "voxel_size_mm": [dx, dy, dz], "center_mm": [cx, cy, cz],
//     "frame": "object frame of docs/geometry.md",
//     "first_voxel_center_mm": [...],            (object frame)
//     "lps_origin_mm": [...],                    (LPS position of voxel (0, 0, 0))
//     "lps_direction": [[1,0,0], [0,-1,0], [0,0,-1]]   (LPS unit direction of x, y, z index)
//   }
//
// The LPS fields follow core/io/patient_frame.h, as the other output formats do.
//
//   TOMO_RETURN_IF_ERROR(WriteRawWithSidecar("/r/volume.raw", "/r/volume.json", volume, geometry));
//
// Errors: INVALID_ARGUMENT when the dims differ from the geometry's; the write errors of
// raw_io and durable_file. Thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// The sidecar text for a raw file named data_file_name (a name, not a path).
std::string RawSidecarJson(const VolumeGeometry& geometry, const std::string& data_file_name);

// Writes the sidecar only (for a raw file written elsewhere, as tomod's volume.raw).
absl::Status WriteRawSidecar(const std::string& sidecar_path, const VolumeGeometry& geometry,
                             const std::string& data_file_name);

// Both files; the sidecar names raw_path's file name.
absl::Status WriteRawWithSidecar(const std::string& raw_path, const std::string& sidecar_path,
                                 const Array3D& volume, const VolumeGeometry& geometry);

}  // namespace tomo::core
