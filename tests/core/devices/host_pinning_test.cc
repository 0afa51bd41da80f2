// Tests of core::PinHostMemory (core/devices/host_pinning.cc). Without a CUDA device (CI,
// a CPU-only build) it pins nothing and says why; with one (the GPU machine; the device
// tests skip elsewhere) it page-locks the range until the region goes: registering the
// same range again fails while it is locked and succeeds once it has been unlocked. That
// copies go straight from the locked memory, with the same results, is
// cuda_filtered_back_projection_test's PageLockedProjectionsMatchPageableBitForBit.
#include "core/devices/host_pinning.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

bool HaveCudaDevice() { return !ListCudaDevices().empty(); }

TEST(HostPinningTest, NoBytesPinNothing) {
  absl::StatusOr<std::unique_ptr<PinnedHostRegion>> region = PinHostMemory(nullptr, 0);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_FALSE((*region)->pinned());
  EXPECT_FALSE((*region)->why_not().empty());
  std::vector<float> values(4);
  region = PinHostMemory(values.data(), 0);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_FALSE((*region)->pinned());
}

TEST(HostPinningTest, WithoutACudaDevicePinsNothingAndSaysWhy) {
  if (HaveCudaDevice()) GTEST_SKIP() << "a CUDA device is present";
  Array3D projections({3, 4, 5}, 1.5f);
  absl::StatusOr<std::unique_ptr<PinnedHostRegion>> region =
      PinHostMemory(projections.data(), projections.size_bytes());
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_FALSE((*region)->pinned());
  EXPECT_EQ((*region)->data(), projections.data());
  EXPECT_EQ((*region)->size_bytes(), projections.size_bytes());
  EXPECT_EQ((*region)->why_not(), BuiltWithCuda() ? "no CUDA device"
                                                   : "this build has no CUDA backend");
  region->reset();
  EXPECT_EQ(projections.at(2, 3, 4), 1.5f);  // untouched
}

TEST(HostPinningTest, UnpinnedRegionReportsItsRange) {
  std::vector<float> values(16);
  std::unique_ptr<PinnedHostRegion> region =
      PinnedHostRegion::Unpinned(values.data(), 64, "because");
  EXPECT_FALSE(region->pinned());
  EXPECT_EQ(region->data(), values.data());
  EXPECT_EQ(region->size_bytes(), 64u);
  EXPECT_EQ(region->why_not(), "because");
}

TEST(HostPinningTest, LocksUntilTheRegionGoes) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  Array3D projections({16, 64, 64}, 0.25f);
  absl::StatusOr<std::unique_ptr<PinnedHostRegion>> region =
      PinHostMemory(projections.data(), projections.size_bytes());
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE((*region)->pinned()) << (*region)->why_not();
  EXPECT_TRUE((*region)->why_not().empty());
  EXPECT_EQ((*region)->data(), projections.data());
  EXPECT_EQ((*region)->size_bytes(), projections.size_bytes());
  // Locked already: a second registration of the range is refused (an error, which
  // callers take as "use it unpinned").
  absl::StatusOr<std::unique_ptr<PinnedHostRegion>> again =
      PinHostMemory(projections.data(), projections.size_bytes());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInternal) << again.status();
  EXPECT_NE(again.status().message().find("cudaHostRegister"), std::string::npos)
      << again.status();
  // Unlocked with the region: it can be locked again.
  region->reset();
  again = PinHostMemory(projections.data(), projections.size_bytes());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->pinned());
  again->reset();
  EXPECT_EQ(projections.at(15, 63, 63), 0.25f);  // untouched
}

}  // namespace
}  // namespace tomo::core
