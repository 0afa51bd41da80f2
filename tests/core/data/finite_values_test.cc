// Tests of core/data/finite_values.cc: the first non-finite value is found wherever it is,
// in arrays of one block and of several (searched on several threads), with later bad
// values in other blocks that must not win.
#include "core/data/finite_values.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

TEST(FiniteValuesTest, FindsTheFirstNonFiniteValue) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{5000}, int64_t{13} << 20}) {
    SCOPED_TRACE(::testing::Message() << count << " values");
    std::vector<float> values(static_cast<size_t>(count), 1.0f);
    EXPECT_EQ(FirstNonFiniteIndex(values.data(), count), -1);
    if (count == 0) continue;
    std::uniform_int_distribution<int64_t> index(0, count - 1);
    for (int trial = 0; trial < 4; ++trial) {
      std::fill(values.begin(), values.end(), 1.0f);
      const int64_t first = index(random);
      values[static_cast<size_t>(first)] = trial % 2 ? inf : nan;
      // Later bad values, also in later blocks, must not be reported.
      for (int extra = 0; extra < 3; ++extra) {
        const int64_t later = first + 1 + index(random) % std::max<int64_t>(1, count - first);
        if (later < count) values[static_cast<size_t>(later)] = -inf;
      }
      EXPECT_EQ(FirstNonFiniteIndex(values.data(), count), first);
    }
  }
}

// Finite values of every magnitude and sign (the largest, denormals, zeros) are finite; the
// check looks at exponent bits, so the edges of the range matter.
TEST(FiniteValuesTest, ExtremeFiniteValuesAreFinite) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<float> extremes = {std::numeric_limits<float>::max(),
                                       -std::numeric_limits<float>::max(),
                                       std::numeric_limits<float>::min(),
                                       std::numeric_limits<float>::denorm_min(),
                                       -std::numeric_limits<float>::denorm_min(),
                                       0.0f, -0.0f};
  std::vector<float> values(3000);
  for (float& v : values) v = extremes[random() % extremes.size()];
  EXPECT_EQ(FirstNonFiniteIndex(values.data(), static_cast<int64_t>(values.size())), -1);
  const size_t bad = random() % values.size();
  values[bad] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFiniteIndex(values.data(), static_cast<int64_t>(values.size())),
            static_cast<int64_t>(bad));
}

}  // namespace
}  // namespace tomo::core
