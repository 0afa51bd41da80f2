// CudaVsCpuTest: the fixture of the GPU tests, and the comparisons they share. It skips without a CUDA device, and gives
// each test the first device's backend, the CPU reference backend and a freshly seeded
// generator (the seed is printed on failure through testing::SeedTrace).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/operators/backend.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {

// Whether every element is finite (outputs are poisoned with NaN before a run).
inline bool AllFinite(const Array3D& a) {
  for (int64_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a.data()[i])) return false;
  }
  return true;
}

// max |a - b| / max |b| (max |a - b| when b is all zero).
inline double RelativeMaxDifference(const Array3D& a, const Array3D& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

class CudaVsCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<DeviceInfo> devices = ListCudaDevices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    auto backend = MakeBackend(devices[0]);
    ASSERT_TRUE(backend.ok()) << backend.status();
    cuda_ = std::move(backend).value();
    seed_ = testing::TestSeed();
    random_.seed(seed_);
  }

  std::unique_ptr<Backend> cuda_;
  CpuBackend cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

}  // namespace tomo::core
