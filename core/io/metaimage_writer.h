// MetaImage (.mha: text header and data in one file), the native format of ITK-based tools
// (ITK-SNAP, 3D Slicer, SimpleITK, RTK).
//
// Header keys, in this order (ElementDataFile = LOCAL must be last: the data follow it):
//   ObjectType = Image, NDims = 3, BinaryData = True, BinaryDataByteOrderMSB = False,
//   CompressedData = False, TransformMatrix, Offset, CenterOfRotation = 0 0 0,
//   ElementSpacing, DimSize, ElementType = MET_FLOAT, ElementDataFile = LOCAL
// then the volume's float32 values, little-endian, x fastest. ITK reads MetaImage geometry
// as LPS: Offset is the LPS position of voxel (0, 0, 0) and TransformMatrix lists the LPS
// unit directions of the x, y and z index axes, one axis after the other (ITK's
// direction-matrix columns), as core/io/patient_frame.h defines them.
//
//   TOMO_RETURN_IF_ERROR(WriteMetaImage("/results/volume.mha", volume, geometry));
//
// Errors: INVALID_ARGUMENT when the dims differ from the geometry's; the durable-file
// errors (core/io/durable_file.h). Thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

absl::Status WriteMetaImage(const std::string& path, const Array3D& volume,
                            const VolumeGeometry& geometry);

// The header text, ending with "ElementDataFile = LOCAL\n".
std::string MetaImageHeader(const VolumeGeometry& geometry);

}  // namespace tomo::core
