// Raw little-endian float32 files: the simplest input and output format.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D sinogram, ReadRawFloat32(path, geometry.projection_dims()));
//   TOMO_RETURN_IF_ERROR(WriteRawFloat32(path, volume));
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"

namespace tomo::core {

// NOT_FOUND when the file cannot be opened; INVALID_ARGUMENT naming the file, its size and
// the expected size when they differ; DATA_LOSS on a short read.
absl::StatusOr<Array3D> ReadRawFloat32(const std::string& path, Dims3 dims);
// Interprets bytes as little-endian float32 of dims. INVALID_ARGUMENT on a size mismatch,
// and naming the first index of a value that is NaN or infinite.
absl::StatusOr<Array3D> Float32FromBytes(const void* bytes, size_t size_bytes, Dims3 dims);
// Writes through a temporary file, fsynced and renamed (core/io/durable_file.h), so a reader
// never sees half a file; large files on tmpfs are written by several threads.
absl::Status WriteRawFloat32(const std::string& path, const Array3D& array);

}  // namespace tomo::core
