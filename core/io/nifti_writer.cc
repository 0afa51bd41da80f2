#include "core/io/nifti_writer.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/io/durable_file.h"
#include "core/io/patient_frame.h"
#include "nifti1_io.h"  // niftilib; includes <znzlib.h> from its own folder

namespace tomo::core {
namespace {

struct NiftiImageDeleter {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};
using NiftiImage = std::unique_ptr<nifti_image, NiftiImageDeleter>;

constexpr int64_t kMaxNiftiSide = 32767;  // nifti_1_header.dim[] is short

mat44 ToMat44(const Affine4& affine) {
  mat44 m;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) m.m[r][c] = static_cast<float>(affine.m[r][c]);
  }
  return m;
}

}  // namespace

Affine4 NiftiRasAffine(const VolumeGeometry& geometry) {
  const Vec3 origin = ObjectToRas(VoxelCenterMm(geometry, 0, 0, 0));
  // Index i advances along the object's +x, j along +y, k along +z.
  const Vec3 x_axis = ObjectToRas({1, 0, 0});
  const Vec3 y_axis = ObjectToRas({0, 1, 0});
  const Vec3 z_axis = ObjectToRas({0, 0, 1});
  const Vec3& size = geometry.voxel_size_mm();
  Affine4 affine;
  const Vec3 columns[3] = {size.x * x_axis, size.y * y_axis, size.z * z_axis};
  for (int c = 0; c < 3; ++c) {
    affine.m[0][c] = columns[c].x;
    affine.m[1][c] = columns[c].y;
    affine.m[2][c] = columns[c].z;
  }
  affine.m[0][3] = origin.x;
  affine.m[1][3] = origin.y;
  affine.m[2][3] = origin.z;
  affine.m[3][3] = 1.0;
  return affine;
}

absl::Status WriteNifti(const std::string& path, const Array3D& volume,
                        const VolumeGeometry& geometry) {
  if (!absl::EndsWith(path, ".nii") && !absl::EndsWith(path, ".nii.gz")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a NIfTI-1 file name must end in .nii or .nii.gz"));
  }
  TOMO_RETURN_IF_ERROR(CheckDimsMatch(path, volume.dims(), geometry.dims(), "(z, y, x)"));
  const Size3& size = geometry.size();
  if (size.x > kMaxNiftiSide || size.y > kMaxNiftiSide || size.z > kMaxNiftiSide) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a volume of ", size.x, " x ", size.y, " x ", size.z,
        " voxels; NIfTI-1 dimensions are at most ", kMaxNiftiSide, " (16-bit)"));
  }
  const int dims[8] = {3, static_cast<int>(size.x), static_cast<int>(size.y),
                       static_cast<int>(size.z), 1, 1, 1, 1};
  // data_fill 0: no buffer; the image points at the volume's own values while it is
  // written (niftilib only reads them) and lets go of them before it is freed.
  NiftiImage image(nifti_make_new_nim(dims, NIFTI_TYPE_FLOAT32, /*data_fill=*/0));
  if (image == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": niftilib cannot make an image header"));
  }
  const Vec3& voxel = geometry.voxel_size_mm();
  image->dx = image->pixdim[1] = static_cast<float>(voxel.x);
  image->dy = image->pixdim[2] = static_cast<float>(voxel.y);
  image->dz = image->pixdim[3] = static_cast<float>(voxel.z);
  image->xyz_units = NIFTI_UNITS_MM;
  image->time_units = NIFTI_UNITS_UNKNOWN;
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  const mat44 affine = ToMat44(NiftiRasAffine(geometry));
  image->sform_code = NIFTI_XFORM_SCANNER_ANAT;
  image->sto_xyz = affine;
  image->sto_ijk = nifti_mat44_inverse(affine);
  // The same transform as a quaternion (qform): its rotation is proper, so qfac is 1.
  image->qform_code = NIFTI_XFORM_SCANNER_ANAT;
  float qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
  nifti_mat44_to_quatern(affine, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
  image->quatern_b = qb;
  image->quatern_c = qc;
  image->quatern_d = qd;
  image->qoffset_x = qx;
  image->qoffset_y = qy;
  image->qoffset_z = qz;
  image->qfac = qfac;
  image->qto_xyz = nifti_quatern_to_mat44(qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac);
  image->qto_ijk = nifti_mat44_inverse(image->qto_xyz);
  std::snprintf(image->descrip, sizeof(image->descrip), "tomoserve reconstruction, 1/mm");
  image->cal_min = image->cal_max = 0;

  const std::string temporary = TemporaryPathFor(path);
  if (nifti_set_filenames(image.get(), temporary.c_str(), /*check=*/0, /*set_byte_order=*/1) !=
      0) {
    return absl::InternalError(absl::StrCat(path, ": niftilib refuses the name ", temporary));
  }
  image->data = const_cast<float*>(volume.data());
  nifti_image_write(image.get());
  image->data = nullptr;
  // nifti_image_write reports failures only on stderr: read the header back, and check
  // the size of an uncompressed file (header, 4 extension bytes, data).
  std::error_code size_error;
  const uint64_t file_bytes = std::filesystem::file_size(temporary, size_error);
  NiftiImage check(nifti_image_read(temporary.c_str(), /*read_data=*/0));
  const bool whole = check != nullptr && check->nx == dims[1] && check->ny == dims[2] &&
                     check->nz == dims[3] && check->datatype == NIFTI_TYPE_FLOAT32 &&
                     !size_error &&
                     (absl::EndsWith(path, ".gz") ||
                      file_bytes == static_cast<uint64_t>(check->iname_offset) + volume.size_bytes());
  if (!whole) {
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat(path, ": niftilib could not write ", temporary));
  }
  return SyncAndRename(temporary, path);
}

}  // namespace tomo::core
