// Several backends of one kind for the tests of runs on several devices
// (several_devices_resident_operators_test, several_devices_iterative_test), and the cone
// problem they share. Kind "cpu": CpuBackends (always there; each a "device" of its own).
// Kind "cuda": the CUDA devices, backend i on device i % count, so that three backends run
// on two GPUs (two of them on one device, through their own streams) and the device paths
// are exercised on a machine with one GPU too; without a CUDA device the tests skip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"

namespace tomo::testing {

// count backends of `kind`; an empty vector when the kind has no device here (the caller
// skips).
inline absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> MakeSeveralBackends(
    const std::string& kind, int count) {
  std::vector<std::unique_ptr<core::Backend>> backends;
  if (kind == "cpu") {
    // Two threads each: the devices' work is serial here, the threads are the CPU's.
    for (int i = 0; i < count; ++i) backends.push_back(std::make_unique<core::CpuBackend>(2));
    return backends;
  }
  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty()) return backends;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend =
        core::MakeBackend(devices[static_cast<size_t>(i) % devices.size()]);
    if (!backend.ok()) return backend.status();
    backends.push_back(std::move(backend).value());
  }
  return backends;
}

inline std::vector<core::Backend*> Pointers(
    const std::vector<std::unique_ptr<core::Backend>>& backends) {
  std::vector<core::Backend*> result;
  for (const auto& backend : backends) result.push_back(backend.get());
  return result;
}

// A circular cone of 49 views (not divisible by 2 or 3; at least 16 views per part on 3
// devices, so that a CUDA device picks the same forward sampler for its part as one device
// for all views) on a 29 x 33 detector of 1.6 mm pixels, a 21 x 23 x 17 volume of 0.8 x
// 0.8 x 0.9 mm voxels, and the 3D Shepp-Logan of radius 7 mm: its exact projections and
// its rasterisation.
struct SeveralDevicesProblem {
  core::VectorGeometry geometry;
  core::VolumeGeometry volume;
  core::Array3D projections;
  core::Array3D truth;
};

inline SeveralDevicesProblem MakeSeveralDevicesProblem(int64_t views = 49) {
  core::FanConeOptions cone;
  cone.detector = {29, 33, 1.6, 1.6, 0.4, -0.3};
  cone.source_origin_mm = 80;
  cone.origin_detector_mm = 70;
  cone.angles_rad = core::UniformAnglesRad(views, 0.1, 0.1 + 2 * 3.14159265358979323846);
  core::VectorGeometry geometry = core::MakeCircularCone(cone).value();
  core::VolumeGeometry volume =
      core::VolumeGeometry::Create({21, 23, 17}, {0.8, 0.8, 0.9}, {0.2, -0.1, 0.3}).value();
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(7.0);
  core::Array3D projections = phantom.Project(geometry, 2);
  core::Array3D truth = phantom.Rasterize(volume, 2);
  return {std::move(geometry), std::move(volume), std::move(projections), std::move(truth)};
}

}  // namespace tomo::testing
