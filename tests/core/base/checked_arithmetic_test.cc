#include "core/base/checked_arithmetic.h"

#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

TEST(CheckedArithmeticTest, AddDetectsTheWrapOfTheReportedSpec) {
  // 2^64 - 36 + 36 wraps to 0 in plain uint64_t arithmetic.
  EXPECT_FALSE(CheckedAdd<uint64_t>(kMax64 - 35, uint64_t{36}).has_value());
  EXPECT_EQ(CheckedAdd<uint64_t>(kMax64 - 36, uint64_t{36}), kMax64);
  EXPECT_FALSE(CheckedAdd<int32_t>(int64_t{1} << 40, 0).has_value());
}

TEST(CheckedArithmeticTest, SubRefusesNegativeUnsignedResults) {
  EXPECT_FALSE(CheckedSub<uint64_t>(uint64_t{3}, uint64_t{4}).has_value());
  EXPECT_EQ(CheckedSub<uint64_t>(uint64_t{4}, uint64_t{3}), 1u);
}

TEST(CheckedArithmeticTest, ProductOfManyFactors) {
  EXPECT_EQ(CheckedProduct<uint64_t>(720, 64, 768, 4), uint64_t{720} * 64 * 768 * 4);
  EXPECT_FALSE(CheckedProduct<uint64_t>(uint64_t{1} << 32, uint64_t{1} << 32).has_value());
  EXPECT_FALSE(CheckedProduct<uint64_t>(int64_t{-1}, 2).has_value());  // negative factor
  EXPECT_FALSE(CheckedProduct<int64_t>(65536, 65536, 65536, 65536).has_value());
  EXPECT_EQ(CheckedProduct<int64_t>(7), 7);
}

TEST(CheckedArithmeticTest, CastRefusesValuesThatDoNotFit) {
  EXPECT_FALSE(CheckedCast<uint64_t>(int64_t{-1}).has_value());
  EXPECT_FALSE(CheckedCast<int64_t>(kMax64).has_value());
  EXPECT_EQ(CheckedCast<size_t>(int64_t{42}), 42u);
}

TEST(CheckedArithmeticTest, SumStaysOverflowedOnceItWraps) {
  CheckedSum<uint64_t> sum;
  EXPECT_TRUE(sum.Add(kMax64 - 35));
  EXPECT_FALSE(sum.Add(uint64_t{36}));
  EXPECT_FALSE(sum.ok());
  EXPECT_FALSE(sum.Add(uint64_t{0}));  // stays refused
  EXPECT_FALSE(sum.result().has_value());
}

TEST(CheckedArithmeticTest, AgreesWithWideArithmeticOnRandomOperands) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t a = random() >> (random() % 64), b = random() >> (random() % 64);
    const unsigned __int128 wide_sum = static_cast<unsigned __int128>(a) + b;
    const unsigned __int128 wide_product = static_cast<unsigned __int128>(a) * b;
    const std::optional<uint64_t> sum = CheckedAdd<uint64_t>(a, b);
    const std::optional<uint64_t> product = CheckedMul<uint64_t>(a, b);
    ASSERT_EQ(sum.has_value(), wide_sum <= kMax64) << a << " + " << b;
    if (sum) ASSERT_EQ(*sum, static_cast<uint64_t>(wide_sum));
    ASSERT_EQ(product.has_value(), wide_product <= kMax64) << a << " * " << b;
    if (product) ASSERT_EQ(*product, static_cast<uint64_t>(wide_product));
  }
}

}  // namespace
}  // namespace tomo::core
