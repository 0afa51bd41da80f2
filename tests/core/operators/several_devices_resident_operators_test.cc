// SeveralDevicesResidentOperators on 2 and 3 backends of each kind (several_backends.h):
// the split of projections by views, the replicated volumes, the projector's reduction
// against one device's, the dots, the refusals, CopyFromPeer. Kind "cuda" skips without
// a CUDA device (label gpu).
#include "core/operators/several_devices_resident_operators.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/operators/host_resident_operators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/operators/several_backends.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

bool SameBits(const Array3D& a, const Array3D& b) {
  return a.dims().d0 == b.dims().d0 && a.dims().d1 == b.dims().d1 && a.dims().d2 == b.dims().d2 &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)) == 0;
}

// max |a - b| / max |b|.
double RelativeMax(const Array3D& a, const Array3D& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return diff / scale;
}

TEST(ViewPartsTest, PartsCoverTheViewsInOrderWithSizesDifferingByAtMostOne) {
  for (int64_t views : {1, 2, 5, 49, 360}) {
    for (int64_t devices : {1, 2, 3, 8}) {
      const int64_t parts = ViewParts(views, devices);
      EXPECT_EQ(parts, std::min(views, devices));
      int64_t next = 0, smallest = views, largest = 0;
      for (int64_t d = 0; d < parts; ++d) {
        const ViewRange range = ViewPart(views, parts, d);
        EXPECT_EQ(range.first, next) << views << " views, part " << d << " of " << parts;
        next += range.count;
        smallest = std::min(smallest, range.count);
        largest = std::max(largest, range.count);
      }
      EXPECT_EQ(next, views);
      EXPECT_GE(smallest, 1);
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_EQ(ViewParts(0, 3), 1);
}

// (kind, devices)
class SeveralDevicesResidentOperatorsTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    const auto& [kind, count] = GetParam();
    auto backends = testing::MakeSeveralBackends(kind, count);
    ASSERT_TRUE(backends.ok()) << backends.status();
    if (backends->empty()) GTEST_SKIP() << "no CUDA device";
    backends_ = std::move(backends).value();
    std::vector<std::unique_ptr<ResidentOperators>> devices;
    for (const auto& backend : backends_) devices.push_back(backend->MakeResidentOperators().value());
    ops_ = SeveralDevicesResidentOperators::Create(std::move(devices)).value();
    one_ = backends_[0]->MakeResidentOperators().value();
    seed_ = testing::TestSeed();
    random_.seed(seed_);
  }
  int count() const { return std::get<1>(GetParam()); }
  bool cpu() const { return std::get<0>(GetParam()) == "cpu"; }

  Array3D DownloadPart(const ResidentArray& array, int64_t d) {
    const ResidentArray* part = ops_->PartOn(array, d);
    EXPECT_NE(part, nullptr) << "device " << d;
    Array3D host = Array3D::Uninitialized(part->dims());
    EXPECT_TRUE(ops_->device(d).Download(*part, host).ok());
    return host;
  }
  // Every replica of a volume bit for bit equal to device 0's.
  void ExpectReplicasIdentical(const ResidentArray& volume) {
    const Array3D first = DownloadPart(volume, 0);
    for (int64_t d = 1; d < count(); ++d) {
      EXPECT_TRUE(SameBits(DownloadPart(volume, d), first)) << "replica on device " << d;
    }
  }

  // Forward and Back of the split projector against device 0's own projector of all views,
  // and the reduction against the partial back projections added in device order.
  void CheckProjector(const VectorGeometry& geometry, const VolumeGeometry& volume) {
    SeveralDevicesResidentOperators& ops = *ops_;
    ResidentOperators& one = *one_;
    std::mt19937_64& random = random_;
    const bool cpu = this->cpu();
    const Dims3 projection_dims = geometry.projection_dims();
    const Array3D x = testing::RandomArray(volume.dims(), random);
    const Array3D y = testing::RandomArray(projection_dims, random);

    auto several = ops.MakeProjector(geometry, volume, ProjectorModel::kJoseph).value();
    auto rx = ops.Allocate(volume.dims(), ResidentRole::kVolume).value();
    auto ry = ops.Allocate(projection_dims, ResidentRole::kProjections).value();
    auto rax = ops.Allocate(projection_dims, ResidentRole::kProjections).value();
    auto raty = ops.Allocate(volume.dims(), ResidentRole::kVolume).value();
    ASSERT_TRUE(ops.Upload(x, *rx).ok());
    ASSERT_TRUE(ops.Upload(y, *ry).ok());
    ASSERT_TRUE(several->Forward(*rx, *rax).ok());
    ASSERT_TRUE(several->Back(*ry, *raty).ok());
    Array3D ax = Array3D::Uninitialized(projection_dims);
    Array3D aty = Array3D::Uninitialized(volume.dims());
    ASSERT_TRUE(ops.Download(*rax, ax).ok());
    ASSERT_TRUE(ops.Download(*raty, aty).ok());

    auto single = one.MakeProjector(geometry, volume, ProjectorModel::kJoseph).value();
    auto ox = one.Allocate(volume.dims()).value();
    auto oy = one.Allocate(projection_dims, ResidentRole::kProjections).value();
    auto oax = one.Allocate(projection_dims, ResidentRole::kProjections).value();
    auto oaty = one.Allocate(volume.dims()).value();
    ASSERT_TRUE(one.Upload(x, *ox).ok());
    ASSERT_TRUE(one.Upload(y, *oy).ok());
    ASSERT_TRUE(single->Forward(*ox, *oax).ok());
    ASSERT_TRUE(single->Back(*oy, *oaty).ok());
    Array3D ax1 = Array3D::Uninitialized(projection_dims);
    Array3D aty1 = Array3D::Uninitialized(volume.dims());
    ASSERT_TRUE(one.Download(*oax, ax1).ok());
    ASSERT_TRUE(one.Download(*oaty, aty1).ok());
    // Each view is projected alone: the same rays. The back projection adds the views in
    // another order (per device, then the devices' sums): float rounding.
    EXPECT_LE(RelativeMax(ax, ax1), cpu ? 0.0 : 1e-5);
    EXPECT_LE(RelativeMax(aty, aty1), 1e-5);
    ExpectReplicasIdentical(*raty);

    // The reduction exactly: device 0's sum = the partials (each device's views back
    // projected alone by device 0's own operators) added in device order.
    const int64_t views = projection_dims.d0;
    const int64_t parts = ViewParts(views, ops.device_count());
    Array3D sum(volume.dims());
    for (int64_t d = 0; d < parts; ++d) {
      const ViewRange range = ViewPart(views, parts, d);
      std::vector<ViewVectors> subset(geometry.views().begin() + range.first,
                                       geometry.views().begin() + range.first + range.count);
      const VectorGeometry part = VectorGeometry::Create(geometry.beam(), geometry.detector(),
                                                         geometry.rows(), geometry.columns(),
                                                         std::move(subset))
                                      .value();
      Array3D part_y = Array3D::Uninitialized(part.projection_dims());
      std::memcpy(part_y.data(), y.data() + range.first * projection_dims.d1 * projection_dims.d2,
                  static_cast<size_t>(part_y.size()) * sizeof(float));
      auto projector = one.MakeProjector(part, volume, ProjectorModel::kJoseph).value();
      auto py = one.Allocate(part.projection_dims(), ResidentRole::kProjections).value();
      auto pb = one.Allocate(volume.dims()).value();
      ASSERT_TRUE(one.Upload(part_y, *py).ok());
      ASSERT_TRUE(projector->Back(*py, *pb).ok());
      Array3D partial = Array3D::Uninitialized(volume.dims());
      ASSERT_TRUE(one.Download(*pb, partial).ok());
      for (int64_t i = 0; i < sum.size(); ++i) sum.data()[i] += partial.data()[i];
    }
    if (cpu) {
      EXPECT_TRUE(SameBits(aty, sum)) << "relative max difference " << RelativeMax(aty, sum);
    } else {
      EXPECT_LE(RelativeMax(aty, sum), 1e-6);
    }
  }

  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<SeveralDevicesResidentOperators> ops_;
  std::unique_ptr<ResidentOperators> one_;  // device 0's own, for the one-device results
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

TEST_P(SeveralDevicesResidentOperatorsTest, SplitProjectionsHoldTheirViewsAndDownloadInOrder) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{7, 3, 5};
  const Array3D host = testing::RandomArray(dims, random_);
  auto array = ops_->Allocate(dims, ResidentRole::kProjections).value();
  ASSERT_TRUE(ops_->Upload(host, *array).ok());
  const int64_t parts = ViewParts(dims.d0, count());
  for (int64_t d = 0; d < parts; ++d) {
    const ViewRange range = ViewPart(dims.d0, parts, d);
    const Array3D part = DownloadPart(*array, d);
    ASSERT_EQ(part.dims().d0, range.count);
    EXPECT_EQ(std::memcmp(part.data(), host.data() + range.first * dims.d1 * dims.d2,
                          static_cast<size_t>(part.size()) * sizeof(float)),
              0)
        << "device " << d << " should hold views [" << range.first << ", "
        << range.first + range.count << ")";
  }
  Array3D back = Array3D::Uninitialized(dims);
  ASSERT_TRUE(ops_->Download(*array, back).ok());
  EXPECT_TRUE(SameBits(back, host));
}

TEST_P(SeveralDevicesResidentOperatorsTest, VolumesAreReplicatedOnEveryDevice) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{5, 4, 3};
  const Array3D host = testing::RandomArray(dims, random_);
  auto x = ops_->Allocate(dims, ResidentRole::kVolume).value();
  auto y = ops_->Allocate(dims, ResidentRole::kVolume).value();
  ASSERT_TRUE(ops_->Upload(host, *x).ok());
  ASSERT_TRUE(ops_->Fill(0.5f, *y).ok());
  ASSERT_TRUE(ops_->Axpby(2.0f, *x, -1.0f, *y).ok());
  ASSERT_TRUE(ops_->Clamp(0.0f, 1.5f, *y).ok());
  for (int64_t d = 0; d < count(); ++d) {
    const Array3D replica = DownloadPart(*y, d);
    for (int64_t i = 0; i < host.size(); ++i) {
      ASSERT_EQ(replica.data()[i], std::min(std::max(2.0f * host.data()[i] - 0.5f, 0.0f), 1.5f))
          << "device " << d << ", element " << i;
    }
  }
  // Dot of replicated arrays: counted once.
  double expected = 0;
  for (int64_t i = 0; i < host.size(); ++i) expected += static_cast<double>(host.data()[i]) * host.data()[i];
  EXPECT_NEAR(ops_->Dot(*x, *x).value(), expected, 1e-9 * expected);
}

TEST_P(SeveralDevicesResidentOperatorsTest, DotsOfSplitArraysSumTheParts) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{11, 6, 9};
  const Array3D a = testing::RandomArray(dims, random_);
  const Array3D b = testing::RandomArray(dims, random_, -1.0f, 1.0f);
  auto ra = ops_->Allocate(dims, ResidentRole::kProjections).value();
  auto rb = ops_->Allocate(dims, ResidentRole::kProjections).value();
  ASSERT_TRUE(ops_->Upload(a, *ra).ok());
  ASSERT_TRUE(ops_->Upload(b, *rb).ok());
  double ab = 0, aa = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a.data()[i]) * b.data()[i];
    aa += static_cast<double>(a.data()[i]) * a.data()[i];
  }
  EXPECT_NEAR(ops_->Dot(*ra, *rb).value(), ab, 1e-9 * aa);
  // Accumulated over calls, of both roles.
  auto v = ops_->Allocate({2, 2, 2}, ResidentRole::kVolume).value();
  ASSERT_TRUE(ops_->Fill(3.0f, *v).ok());
  ASSERT_TRUE(ops_->AccumulateDot(*ra, *rb).ok());
  ASSERT_TRUE(ops_->AccumulateDot(*ra, *ra).ok());
  ASSERT_TRUE(ops_->AccumulateDot(*v, *v).ok());
  EXPECT_NEAR(ops_->TakeAccumulatedDot().value(), ab + aa + 72.0, 1e-9 * aa);
  EXPECT_EQ(ops_->TakeAccumulatedDot().value(), 0.0);
}

TEST_P(SeveralDevicesResidentOperatorsTest, MixedRolesAreRefusedNamingTheOperation) {
  // Equal element counts: only the roles differ.
  auto volume = ops_->Allocate({3, 4, 5}, ResidentRole::kVolume).value();
  auto projections = ops_->Allocate({3, 4, 5}, ResidentRole::kProjections).value();
  ASSERT_TRUE(ops_->Fill(1.0f, *volume).ok());
  ASSERT_TRUE(ops_->Fill(1.0f, *projections).ok());
  const absl::Status axpby = ops_->Axpby(1.0f, *volume, 1.0f, *projections);
  EXPECT_EQ(axpby.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(axpby.message(), HasSubstr("Axpby"));
  EXPECT_THAT(axpby.message(), HasSubstr("roles"));
  EXPECT_THAT(ops_->Multiply(*projections, *volume).message(), HasSubstr("Multiply"));
  EXPECT_THAT(ops_->Dot(*volume, *projections).status().message(), HasSubstr("Dot"));
  EXPECT_THAT(ops_->AccumulateDot(*projections, *volume).message(), HasSubstr("AccumulateDot"));
  EXPECT_THAT(
      ops_->AddScaledQuotient(1.0f, *projections, *volume, 0.0f, 0.0f, 1.0f, *volume).message(),
      HasSubstr("AddScaledQuotient"));
  // An array of another ResidentOperators.
  auto foreign = one_->Allocate({3, 4, 5}).value();
  EXPECT_EQ(ops_->Fill(0.0f, *foreign).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(SeveralDevicesResidentOperatorsTest, ProjectorSplitsTheViewsAndReducesTheBackProjection) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const testing::SeveralDevicesProblem problem = testing::MakeSeveralDevicesProblem();
  CheckProjector(problem.geometry, problem.volume);
}

TEST_P(SeveralDevicesResidentOperatorsTest, FewerViewsThanDevicesUseTheFirstDevicesAndBroadcast) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  // One view fewer than devices: the last device holds no views, only the broadcast sum.
  const testing::SeveralDevicesProblem problem = testing::MakeSeveralDevicesProblem(count() - 1);
  auto projections = ops_->Allocate(problem.geometry.projection_dims(),
                                    ResidentRole::kProjections).value();
  EXPECT_NE(ops_->PartOn(*projections, count() - 2), nullptr);
  EXPECT_EQ(ops_->PartOn(*projections, count() - 1), nullptr);
  CheckProjector(problem.geometry, problem.volume);
}

TEST_P(SeveralDevicesResidentOperatorsTest, CopyFromPeerThroughHostMemoryByDefault) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{3, 5, 7};
  const Array3D host = testing::RandomArray(dims, random_);
  // SeveralDevicesResidentOperators keeps the default: from a host array of other
  // operators into every replica, and back.
  CpuBackend cpu;
  HostResidentOperators other(cpu);
  auto source = other.Allocate(dims).value();
  ASSERT_TRUE(other.Upload(host, *source).ok());
  auto target = ops_->Allocate(dims, ResidentRole::kVolume).value();
  ASSERT_TRUE(ops_->CopyFromPeer(other, *source, *target).ok());
  for (int64_t d = 0; d < count(); ++d) EXPECT_TRUE(SameBits(DownloadPart(*target, d), host));
  auto returned = other.Allocate(dims).value();
  ASSERT_TRUE(other.CopyFromPeer(*ops_, *target, *returned).ok());
  Array3D back = Array3D::Uninitialized(dims);
  ASSERT_TRUE(other.Download(*returned, back).ok());
  EXPECT_TRUE(SameBits(back, host));
  // A device's own operators from a host array (CUDA: not a CUDA source, so the default).
  auto on_device = ops_->device(count() - 1).Allocate(dims).value();
  ASSERT_TRUE(ops_->device(count() - 1).CopyFromPeer(other, *source, *on_device).ok());
  Array3D from_device = Array3D::Uninitialized(dims);
  ASSERT_TRUE(ops_->device(count() - 1).Download(*on_device, from_device).ok());
  EXPECT_TRUE(SameBits(from_device, host));
  // Device to device (CUDA: cudaMemcpyPeerAsync), then overwriting the source at once.
  auto copy = ops_->device(0).Allocate(dims).value();
  ASSERT_TRUE(ops_->device(0).CopyFromPeer(ops_->device(count() - 1), *on_device, *copy).ok());
  ASSERT_TRUE(ops_->device(count() - 1).Fill(-1.0f, *on_device).ok());
  Array3D copied = Array3D::Uninitialized(dims);
  ASSERT_TRUE(ops_->device(0).Download(*copy, copied).ok());
  EXPECT_TRUE(SameBits(copied, host));
  // Refusals: a source that source_ops did not allocate, dims that differ.
  EXPECT_EQ(ops_->CopyFromPeer(other, *target, *target).code(),
            absl::StatusCode::kInvalidArgument);
  auto smaller = other.Allocate({3, 5, 6}).value();
  EXPECT_EQ(other.CopyFromPeer(other, *source, *smaller).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Devices, SeveralDevicesResidentOperatorsTest,
    ::testing::Combine(::testing::Values("cpu", "cuda"), ::testing::Values(2, 3)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
}  // namespace tomo::core
