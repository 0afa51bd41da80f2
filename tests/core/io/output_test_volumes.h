// Volumes and grids for the output-format tests: random grids (odd and even sizes,
// anisotropic voxels, off-centre) filled with random values, fresh each run (the seed is
// in every failure message through SCOPED_TRACE in the caller).
//
//   std::mt19937_64 random(seed);
//   VolumeGeometry geometry = RandomGrid(random);
//   Array3D volume = RandomValues(geometry, random);
#pragma once

#include <fstream>
#include <random>
#include <string>

#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "gtest/gtest.h"

namespace tomo::testing {

inline core::VolumeGeometry RandomGrid(std::mt19937_64& random, int64_t max_side = 24) {
  std::uniform_int_distribution<int64_t> side(2, max_side);
  std::uniform_real_distribution<double> voxel(0.2, 2.0);
  std::uniform_real_distribution<double> centre(-50.0, 50.0);
  return core::VolumeGeometry::Create({side(random), side(random), side(random)},
                                      {voxel(random), voxel(random), voxel(random)},
                                      {centre(random), centre(random), centre(random)})
      .value();
}

inline core::Array3D RandomValues(const core::VolumeGeometry& geometry, std::mt19937_64& random) {
  std::normal_distribution<float> value(0.02f, 0.01f);
  core::Array3D volume(geometry.dims());
  for (int64_t i = 0; i < volume.size(); ++i) volume.data()[i] = value(random);
  return volume;
}

// A fresh path under the test's temporary directory, named after the test.
inline std::string TestPath(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + info->test_suite_name() + "_" + info->name() + "_" + name;
}

// Leaves garbage at path, so that a writer that silently writes nothing fails its test.
inline void Poison(const std::string& path) {
  std::ofstream(path, std::ios::binary) << "poison: not written by the writer under test";
}

}  // namespace tomo::testing
