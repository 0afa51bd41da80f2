// NIfTI-1 volumes (.nii, or .nii.gz compressed) written with niftilib, for analysis tools
// (FSL, SPM, ITK-SNAP, 3D Slicer, nibabel).
//
// The data are the volume's float32 values in array order (voxel index i = x, j = y, k = z,
// i fastest), in the volume's units (1/mm). The affine is the patient frame of
// core/io/patient_frame.h in RAS: sform (NIFTI_XFORM_SCANNER_ANAT) and the same transform as
// qform (a proper rotation, qfac = 1), so that
//
//   RAS of voxel (i, j, k) = (-x(i), y(j), -z(k))  with x, y, z of VolumeGeometry,
//
// pixdim = voxel_size_mm, xyzt_units = mm. docs/outputs.md draws it.
//
//   TOMO_RETURN_IF_ERROR(WriteNifti("/results/volume.nii.gz", volume, geometry));
//
// Errors: INVALID_ARGUMENT when the path ends in neither .nii nor .nii.gz, the volume's dims
// differ from the geometry's, or a side exceeds NIfTI-1's 32767 (all named); INTERNAL naming
// the path when niftilib cannot write it (niftilib only prints its errors: the header is read
// back, and an uncompressed file's size checked); the durable-file errors.
// Thread-safe for different paths (niftilib keeps only its debug level global).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

absl::Status WriteNifti(const std::string& path, const Array3D& volume,
                        const VolumeGeometry& geometry);

// The 4x4 voxel-index -> RAS (mm) affine written as sform, row-major.
struct Affine4 {
  double m[4][4] = {};
};
Affine4 NiftiRasAffine(const VolumeGeometry& geometry);

}  // namespace tomo::core
