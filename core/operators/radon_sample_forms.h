// The fractional sample index of a voxel for each direction of a RadonGeometry, as a linear
// form of the voxel's index, shared by the CPU and CUDA plane-integral projectors:
//   u_i(ix, iy, iz) = x ix + y iy + z iz + w = x_mm . n_i / dt + (S - 1) / 2,
// with x_mm the voxel's centre (VolumeGeometry). Sample k sits at u = k. Computed in float64.
//
//   std::vector<RadonSampleForm> forms = MakeRadonSampleForms(geometry, volume_geometry);
#pragma once

#include <vector>

#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct RadonSampleForm {
  double x = 0, y = 0, z = 0, w = 0;
};

RadonSampleForm MakeRadonSampleForm(const RadonGeometry& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const RadonDirection& direction);
std::vector<RadonSampleForm> MakeRadonSampleForms(const RadonGeometry& geometry,
                                                  const VolumeGeometry& volume_geometry);

}  // namespace tomo::core
