#include "core/operators/radon_sample_forms.h"

namespace tomo::core {

RadonSampleForm MakeRadonSampleForm(const RadonGeometry& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const RadonDirection& direction) {
  const Vec3 n = direction.unit();
  const double dt = geometry.sample_spacing_mm;
  const Vec3 h = volume_geometry.voxel_size_mm();
  const Vec3 origin{volume_geometry.x_mm(0), volume_geometry.y_mm(0), volume_geometry.z_mm(0)};
  return {n.x * h.x / dt, n.y * h.y / dt, n.z * h.z / dt,
          Dot(origin, n) / dt + 0.5 * static_cast<double>(geometry.num_samples - 1)};
}

std::vector<RadonSampleForm> MakeRadonSampleForms(const RadonGeometry& geometry,
                                                  const VolumeGeometry& volume_geometry) {
  std::vector<RadonSampleForm> forms;
  forms.reserve(geometry.directions.size());
  for (const RadonDirection& direction : geometry.directions) {
    forms.push_back(MakeRadonSampleForm(geometry, volume_geometry, direction));
  }
  return forms;
}

}  // namespace tomo::core
