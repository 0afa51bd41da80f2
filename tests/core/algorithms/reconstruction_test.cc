#include "core/algorithms/reconstruction.h"

#include <memory>

#include "core/geometry/geometry_builders.h"
#include "core/geometry/parallel_2d_form.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ParallelGeometry2D SmallParallel() {
  return ParallelGeometry2D::Create(48, 1.0, 0.0, ParallelGeometry2D::UniformAngles(30, 0, M_PI))
      .value();
}

// A 2D parallel beam is a one-row vector geometry.
ReconstructionRequest SmallRequest() {
  const VolumeGeometry volume = VolumeGeometry::Create({32, 32, 1}, {1, 1, 1}, {}).value();
  return {ParallelGeometry2DAsVectors(SmallParallel(), volume).value(), volume, FbpOptions{}};
}

TEST(ReconstructionTest, BuiltinsAreNamedByTheirOptions) {
  EXPECT_EQ(AlgorithmName(FbpOptions{}), "fbp");
  EXPECT_EQ(AlgorithmName(SirtOptions{}), "sirt");
  EXPECT_EQ(AlgorithmName(SartOptions{}), "sart");
  EXPECT_EQ(AlgorithmName(OsSartOptions{}), "os_sart");
  EXPECT_EQ(AlgorithmName(CglsOptions{}), "cgls");
  EXPECT_EQ(AlgorithmName(StoredArtOptions{}), "art");
  EXPECT_EQ(AlgorithmName(IcdAlgorithmOptions{}), "icd");
  EXPECT_THAT(AlgorithmRegistry::WithBuiltins().Names(),
              ElementsAre("art", "cgls", "fbp", "icd", "os_sart", "sart", "sirt"));
}

TEST(ReconstructionTest, UnknownAlgorithmListsTheKnownOnes) {
  const ReconstructionRequest request = SmallRequest();
  const Array3D sinogram(ProjectionDims(request.geometry), 1.0f);
  CpuBackend backend;
  AlgorithmRegistry empty;
  absl::StatusOr<Array3D> result = empty.Run(request, sinogram, backend, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("\"fbp\" is not available"));
  EXPECT_THAT(result.status().message(), HasSubstr("known algorithms: []"));

  class Nothing final : public Algorithm {
   public:
    absl::StatusOr<Array3D> Run(const ReconstructionRequest&, const Array3D&, Backend&,
                                const RunContext&) const override {
      return Array3D();
    }
  };
  AlgorithmRegistry others;
  others.Register("sirt", std::make_unique<Nothing>());
  others.Register("art", std::make_unique<Nothing>());
  result = others.Run(request, sinogram, backend, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("known algorithms: [art, sirt]"));
}

TEST(ReconstructionTest, RunsFbpThroughTheRegistry) {
  const ReconstructionRequest request = SmallRequest();
  const Array3D sinogram =
      EllipsePhantom::ModifiedSheppLogan(15.0).ParallelProjections(
          SmallParallel(), 2);
  CpuBackend backend;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  absl::StatusOr<Array3D> through_registry = registry.Run(request, sinogram, backend, {});
  ASSERT_TRUE(through_registry.ok()) << through_registry.status();
  absl::StatusOr<Array3D> direct =
      Fbp(SmallParallel(), request.volume, sinogram,
          FbpOptions{}, backend, {});
  ASSERT_TRUE(direct.ok());
  ASSERT_EQ(through_registry->dims(), request.volume.dims());
  double energy = 0;
  for (int64_t i = 0; i < direct->size(); ++i) {
    EXPECT_EQ(through_registry->data()[i], direct->data()[i]);
    energy += direct->data()[i] * direct->data()[i];
  }
  EXPECT_GT(energy, 0.0);
}

TEST(ReconstructionTest, MismatchedProjectionsAreRefused) {
  const ReconstructionRequest request = SmallRequest();
  const Array3D sinogram({29, 1, 48}, 1.0f);
  CpuBackend backend;
  absl::StatusOr<Array3D> result =
      AlgorithmRegistry::WithBuiltins().Run(request, sinogram, backend, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("(29, 1, 48)"));
  EXPECT_THAT(result.status().message(), HasSubstr("(30, 1, 48)"));
}

// "fbp" on a vector geometry is FDK (here a small cone beam), the same numbers as calling it.
TEST(ReconstructionTest, RunsFdkThroughTheRegistryForVectorGeometries) {
  FanConeOptions cone;
  cone.detector = {24, 32, 1.5, 1.5, 0.0, 0.0};
  cone.source_origin_mm = 60;
  cone.origin_detector_mm = 30;
  cone.angles_rad = UniformAnglesRad(60, 0.0, 2 * M_PI);
  absl::StatusOr<VectorGeometry> geometry = MakeCircularCone(cone);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  absl::StatusOr<VolumeGeometry> volume = VolumeGeometry::Create({16, 16, 16}, {1, 1, 1}, {});
  ASSERT_TRUE(volume.ok()) << volume.status();
  const Array3D projections = EllipsoidPhantom::SheppLogan3D(8.0).Project(*geometry, 1);
  const ReconstructionRequest request{*geometry, *volume, FbpOptions{}};
  CpuBackend backend;
  absl::StatusOr<Array3D> through_registry =
      AlgorithmRegistry::WithBuiltins().Run(request, projections, backend, {});
  ASSERT_TRUE(through_registry.ok()) << through_registry.status();
  absl::StatusOr<Array3D> direct = Fdk(*geometry, *volume, projections, FdkOptions{}, backend, {});
  ASSERT_TRUE(direct.ok()) << direct.status();
  ASSERT_EQ(through_registry->dims(), volume->dims());
  double energy = 0;
  for (int64_t i = 0; i < direct->size(); ++i) {
    EXPECT_EQ(through_registry->data()[i], direct->data()[i]);
    energy += direct->data()[i] * direct->data()[i];
  }
  EXPECT_GT(energy, 0.0);
}

}  // namespace
}  // namespace tomo::core
