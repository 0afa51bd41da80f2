#include "core/io/metaimage_writer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/io/durable_file.h"
#include "core/io/patient_frame.h"

namespace tomo::core {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "MetaImage data are written as the host's float32 bytes, declared little-endian");

// Shortest text that reads back as the same double.
std::string Number(double value) { return absl::StrFormat("%.17g", value); }

std::string Triple(const Vec3& v) {
  return absl::StrCat(Number(v.x), " ", Number(v.y), " ", Number(v.z));
}

}  // namespace

std::string MetaImageHeader(const VolumeGeometry& geometry) {
  const Size3& size = geometry.size();
  const Vec3 origin = ObjectToLps(VoxelCenterMm(geometry, 0, 0, 0));
  return absl::StrCat(
      "ObjectType = Image\n", "NDims = 3\n", "BinaryData = True\n",
      "BinaryDataByteOrderMSB = False\n", "CompressedData = False\n",
      "TransformMatrix = ", Triple(LpsDirectionOfX()), " ", Triple(LpsDirectionOfY()), " ",
      Triple(LpsDirectionOfZ()), "\n", "Offset = ", Triple(origin), "\n",
      "CenterOfRotation = 0 0 0\n", "ElementSpacing = ", Triple(geometry.voxel_size_mm()), "\n",
      "DimSize = ", size.x, " ", size.y, " ", size.z, "\n", "ElementType = MET_FLOAT\n",
      "ElementDataFile = LOCAL\n");
}

absl::Status WriteMetaImage(const std::string& path, const Array3D& volume,
                            const VolumeGeometry& geometry) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch(path, volume.dims(), geometry.dims(), "(z, y, x)"));
  return WriteFileDurably(
      path, MetaImageHeader(geometry),
      absl::string_view(reinterpret_cast<const char*>(volume.data()), volume.size_bytes()));
}

}  // namespace tomo::core
