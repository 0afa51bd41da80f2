// The patient frame of every output file: how the object frame of docs/geometry.md (x right
// and y up seen from +z, z the rotation axis) maps to DICOM's patient frame LPS (+x towards
// the patient's left, +y posterior, +z superior) and to NIfTI's RAS (+x right, +y anterior,
// +z superior). One mapping, used by every writer, so that a voxel lands at the same
// patient position in NIfTI, MetaImage, DICOM and the raw sidecar (docs/outputs.md):
//
//   LPS = (x, -y, -z)        RAS = (-x, y, -z)
//
// a proper rotation (180 degrees about x): a supine patient seen from the feet, as an
// axial CT image is shown (+y up is anterior, +x to the right is the patient's left), and
// +z of the object (towards the viewer) is the patient's feet.
//
//   Vec3 lps = ObjectToLps(VoxelCenterMm(geometry, ix, iy, iz));
#pragma once

#include "core/geometry/vec3.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

inline Vec3 ObjectToLps(const Vec3& object_mm) { return {object_mm.x, -object_mm.y, -object_mm.z}; }
inline Vec3 ObjectToRas(const Vec3& object_mm) { return {-object_mm.x, object_mm.y, -object_mm.z}; }

// Centre of voxel (ix, iy, iz) in the object frame, mm (VolumeGeometry's formula).
inline Vec3 VoxelCenterMm(const VolumeGeometry& geometry, double ix, double iy, double iz) {
  return {geometry.x_mm(ix), geometry.y_mm(iy), geometry.z_mm(iz)};
}

// Unit directions, in LPS, in which the array's x, y and z indices advance.
inline Vec3 LpsDirectionOfX() { return {1, 0, 0}; }
inline Vec3 LpsDirectionOfY() { return {0, -1, 0}; }
inline Vec3 LpsDirectionOfZ() { return {0, 0, -1}; }

}  // namespace tomo::core
