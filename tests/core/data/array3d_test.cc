// Tests of core/data/array3d.cc: fill and clone of small and large arrays (large ones are
// filled and copied by several threads, on huge-page-aligned memory), and Uninitialized.
#include "core/data/array3d.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

TEST(Array3DTest, FillsAndClonesSmallAndLargeArrays) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  // 105 values, and 12.6 M values (50 MB: several threads, huge-page allocation).
  for (Dims3 dims : {Dims3{3, 5, 7}, Dims3{6, 1001, 2099}}) {
    SCOPED_TRACE(::testing::Message() << dims.count() << " values");
    Array3D array(dims, 1.5f);
    ASSERT_EQ(array.size(), dims.count());
    int64_t wrong = 0;
    for (int64_t i = 0; i < array.size(); ++i) wrong += array.data()[i] != 1.5f;
    EXPECT_EQ(wrong, 0);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int64_t i = 0; i < array.size(); i += 997) array.data()[i] = uniform(random);
    const Array3D copy = array.Clone();
    ASSERT_EQ(copy.dims(), dims);
    wrong = 0;
    for (int64_t i = 0; i < array.size(); ++i) wrong += copy.data()[i] != array.data()[i];
    EXPECT_EQ(wrong, 0);
    EXPECT_NE(copy.data(), array.data());
  }
}

TEST(Array3DTest, UninitializedHasTheDimsAndIsWritable) {
  Array3D array = Array3D::Uninitialized({4, 1024, 2048});
  EXPECT_EQ(array.dims(), (Dims3{4, 1024, 2048}));
  ASSERT_EQ(array.size(), 4 * 1024 * 2048);
  for (int64_t i = 0; i < array.size(); ++i) array.data()[i] = static_cast<float>(i % 7);
  EXPECT_EQ(array.at(3, 1023, 2047), static_cast<float>((array.size() - 1) % 7));
  Array3D empty = Array3D::Uninitialized({0, 3, 3});
  EXPECT_EQ(empty.size(), 0);
}

}  // namespace
}  // namespace tomo::core
