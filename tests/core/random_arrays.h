// Fresh random inputs for operator tests: arrays and angle sets drawn from a seeded
// generator (see random_seed.h for the seed, printed on failure).
//
// The default range is positive, which keeps inner products free of cancellation, so that
// a relative tolerance on <A x, y> means what it says.
//
//   std::mt19937_64 random(testing::TestSeed());
//   Array3D volume = testing::RandomArray({1, 64, 64}, random);
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/data/array3d.h"

namespace tomo::testing {

inline core::Array3D RandomArray(core::Dims3 dims, std::mt19937_64& random, float low = 0.25f,
                                 float high = 1.25f) {
  std::uniform_real_distribution<float> uniform(low, high);
  core::Array3D array(dims);
  for (int64_t i = 0; i < array.size(); ++i) array.data()[i] = uniform(random);
  return array;
}

// count angles drawn uniformly from [0, 2 pi).
inline std::vector<double> RandomAngles(int count, std::mt19937_64& random) {
  std::uniform_real_distribution<double> angle(0, 2 * M_PI);
  std::vector<double> angles(static_cast<size_t>(count));
  for (double& a : angles) a = angle(random);
  return angles;
}

}  // namespace tomo::testing
