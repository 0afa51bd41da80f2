// TestSeed(): a fresh seed per run, so that randomised tests explore new inputs each
// time, unless TOMO_TEST_SEED is set to replay a failure. Tests print it with
// SCOPED_TRACE so that every failure message carries it.
//
//   const uint64_t seed = tomo::testing::TestSeed();
//   SCOPED_TRACE(tomo::testing::SeedTrace(seed));
//   std::mt19937_64 random(seed);
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace tomo::testing {

inline uint64_t TestSeed() {
  if (const char* fixed = std::getenv("TOMO_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    return std::strtoull(fixed, nullptr, 10);
  }
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

inline std::string SeedTrace(uint64_t seed) {
  return "random seed " + std::to_string(seed) +
         " (replay with TOMO_TEST_SEED=" + std::to_string(seed) + ")";
}

}  // namespace tomo::testing
