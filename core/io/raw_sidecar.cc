#include "core/io/raw_sidecar.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/io/durable_file.h"
#include "core/io/patient_frame.h"
#include "core/io/raw_io.h"

namespace tomo::core {
namespace {

std::string Number(double value) { return absl::StrFormat("%.17g", value); }

std::string Array(const Vec3& v) {
  return absl::StrCat("[", Number(v.x), ", ", Number(v.y), ", ", Number(v.z), "]");
}

// A JSON string literal of text (names are file names: quote, backslash and control
// characters escaped).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string RawSidecarJson(const VolumeGeometry& geometry, const std::string& data_file_name) {
  const Size3& size = geometry.size();
  const Vec3 first = VoxelCenterMm(geometry, 0, 0, 0);
  return absl::StrCat(
      "{\n", "  \"data_file\": ", JsonString(data_file_name), ",\n",
      "  \"element_type\": \"float32\",\n", "  \"byte_order\": \"little_endian\",\n",
      "  \"layout\": \"z-y-x, x fastest\",\n", "  \"units\": \"1/mm\",\n",
      "  \"size\": [", size.x, ", ", size.y, ", ", size.z, "],\n",
      "  \"voxel_size_mm\": ", Array(geometry.voxel_size_mm()), ",\n",
      "  \"center_mm\": ", Array(geometry.center_mm()), ",\n",
      "  \"frame\": \"object frame of docs/geometry.md\",\n",
      "  \"first_voxel_center_mm\": ", Array(first), ",\n",
      "  \"lps_origin_mm\": ", Array(ObjectToLps(first)), ",\n",
      "  \"lps_direction\": [", Array(LpsDirectionOfX()), ", ", Array(LpsDirectionOfY()), ", ",
      Array(LpsDirectionOfZ()), "]\n", "}\n");
}

absl::Status WriteRawSidecar(const std::string& sidecar_path, const VolumeGeometry& geometry,
                             const std::string& data_file_name) {
  return WriteFileDurably(sidecar_path, RawSidecarJson(geometry, data_file_name));
}

absl::Status WriteRawWithSidecar(const std::string& raw_path, const std::string& sidecar_path,
                                 const Array3D& volume, const VolumeGeometry& geometry) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch(raw_path, volume.dims(), geometry.dims(), "(z, y, x)"));
  TOMO_RETURN_IF_ERROR(WriteRawFloat32(raw_path, volume));
  return WriteRawSidecar(sidecar_path, geometry,
                         std::filesystem::path(raw_path).filename().string());
}

}  // namespace tomo::core
