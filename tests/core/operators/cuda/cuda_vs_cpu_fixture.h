// CudaVsCpuTest: the fixture of the GPU tests. It skips without a CUDA device, and gives
// each test the first device's backend, the CPU reference backend and a freshly seeded
// generator (the seed is printed on failure through testing::SeedTrace).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/devices/devices.h"
#include "core/operators/backend.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {

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
