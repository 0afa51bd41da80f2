// Tests of the CUDA VectorGeometry projectors (core/operators/cuda/vector_forward.cu,
// vector_back.cu, the CudaBackend methods and DeviceVectorProjector) against the CPU
// reference (core/operators/cpu/cpu_vector_projector.cc), for parallel, flat cone,
// cylindrical cone, helical, 2D fan (flat and cylindrical), 2D parallel and freely tilted
// geometries with odd sizes, anisotropic voxels, off-centre volumes and detector offsets,
// and more views than one layered texture holds; every launch shape of the back projector
// (one-slice volumes take its 2D kernel); the device-resident weighted ramp filter.
//
// Every test skips when core::ListCudaDevices() is empty (CI has no GPU). Inputs are fresh
// random values each run (seed printed; TOMO_TEST_SEED replays); outputs are filled with NaN
// first and every element must come back finite (written). Measured differences are
// printed as "[ measure ]" lines.
//
// Tolerances, on max |cuda - cpu| / max |cpu|, and why: the CPU evaluates positions and
// sums in float64, the kernels in float32.
//  - exact sampler (plain loads, float interpolation): float rounding of positions of
//    magnitude ~100 voxels and of the sums: kExactTolerance = 1e-4 (about 1e-5 expected).
//  - texture samplers (what CudaBackend uses: layered 2D textures for the forward
//    projector of these small volumes, the 3D texture for large ones, a layered 2D texture
//    for the back projector, float16 for kFdk; the device projector's float16 option is
//    also checked for kNone): the hardware's interpolation weights have 8
//    fractional bits, an error up to 2^-9 of neighbouring differences per sample (data in
//    [0.25, 1.25] here), partly averaging out along a ray or over views:
//    kTextureTolerance = 4e-3 (about 1e-3 expected).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/base/status_macros.h"
#include "core/devices/devices.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/vector_geometry.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_host_projector.h"
#include "core/operators/cuda/cuda_row_filter.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr double kExactTolerance = 1e-4;
constexpr double kTextureTolerance = 4e-3;
constexpr double kPi = 3.14159265358979323846;

struct Case {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
};

using testing::RandomAngles;
using testing::RandomArray;

Vec3 RandomUnit(std::mt19937_64& random) {
  std::normal_distribution<double> normal;
  return Normalized(Vec3{normal(random), normal(random), normal(random)});
}

// Cone views around random directions, each detector tilted at random.
VectorGeometry TiltedCone(std::mt19937_64& random, int views, int rows, int columns) {
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<ViewVectors> vectors;
  for (int i = 0; i < views; ++i) {
    const Vec3 axis = RandomUnit(random);
    ViewVectors v;
    v.source = -(85.0 + 5 * uniform(random)) * axis + Vec3{uniform(random), uniform(random), 0};
    v.detector_center = (45.0 + 5 * uniform(random)) * axis;
    Vec3 e1 = Normalized(Cross(axis, RandomUnit(random)));
    Vec3 e2 = Cross(axis, e1);
    const Vec3 tilt = 0.2 * RandomUnit(random);
    v.u = (1.3 + 0.2 * uniform(random)) * Normalized(e1 + 0.3 * tilt);
    v.v = (1.1 + 0.2 * uniform(random)) * Normalized(e2 - 0.3 * tilt);
    vectors.push_back(v);
  }
  return VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, rows, columns,
                                std::move(vectors))
      .value();
}

// Parallel views along random directions, some nearly along z, one exactly along -y.
VectorGeometry TiltedParallel(std::mt19937_64& random, int views, int rows, int columns) {
  std::vector<ViewVectors> vectors;
  for (int i = 0; i < views; ++i) {
    Vec3 direction = RandomUnit(random);
    if (i == 0) direction = {0, -1, 0};
    if (i == 1) direction = Normalized(Vec3{0.1, -0.05, 1.0});
    ViewVectors v;
    v.source = direction;
    v.detector_center = 0.7 * RandomUnit(random);
    const Vec3 e1 = Normalized(Cross(direction, i == 0 ? Vec3{0, 0, 1} : RandomUnit(random)));
    const Vec3 e2 = Cross(direction, e1);
    v.u = 1.2 * e1;
    v.v = 0.9 * e2;
    vectors.push_back(v);
  }
  return VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, rows, columns,
                                std::move(vectors))
      .value();
}

std::vector<Case> Cases(std::mt19937_64& random) {
  std::vector<Case> cases;
  const VolumeGeometry volume =
      VolumeGeometry::Create({33, 29, 21}, {1.0, 0.8, 1.2}, {0.7, -1.3, 0.9}).value();
  {
    DetectorLayout detector{23, 41, 0.9, 1.1, 1.7, -0.8};
    std::vector<double> angles = RandomAngles(11, random);
    angles.push_back(0.0);
    cases.push_back({"parallel3d", MakeParallel3D(detector, angles).value(), volume});
  }
  cases.push_back({"parallel_tilted", TiltedParallel(random, 9, 27, 37), volume});
  {
    FanConeOptions cone;
    cone.detector = {29, 47, 1.3, 1.25, 2.1, -1.7};
    cone.source_origin_mm = 80;
    cone.origin_detector_mm = 40;
    cone.angles_rad = RandomAngles(13, random);
    cases.push_back({"cone_flat", MakeCircularCone(cone).value(), volume});
    cone.shape = DetectorShape::kCylindrical;
    cases.push_back({"cone_cylindrical", MakeCircularCone(cone).value(), volume});
    HelicalOptions helical;
    helical.cone = cone;
    helical.cone.shape = DetectorShape::kFlat;
    helical.cone.detector.rows = 9;
    helical.cone.angles_rad = UniformAnglesRad(19, 0.3, 4 * kPi);
    helical.pitch_mm_per_turn = 14;
    helical.z_start_mm = -12;
    cases.push_back({"helical", MakeHelicalCone(helical).value(), volume});
    helical.cone.shape = DetectorShape::kCylindrical;
    cases.push_back({"helical_cylindrical", MakeHelicalCone(helical).value(), volume});
  }
  cases.push_back({"cone_tilted", TiltedCone(random, 10, 31, 43), volume});
  {
    FanConeOptions fan;
    fan.detector = {1, 61, 1.0, 0.95, 0.6, 0};
    fan.source_origin_mm = 70;
    fan.origin_detector_mm = 35;
    fan.angles_rad = RandomAngles(15, random);
    cases.push_back({"fan2d", MakeFan2D(fan).value(),
                     VolumeGeometry::Create({45, 39, 1}, {0.9, 0.9, 1.0}, {0.4, 0.2, 0}).value()});
    fan.shape = DetectorShape::kCylindrical;
    fan.detector.columns = 97;
    fan.angles_rad = RandomAngles(23, random);
    cases.push_back({"fan2d_cylindrical", MakeFan2D(fan).value(),
                     VolumeGeometry::Create({71, 67, 1}, {0.6, 0.7, 1.0}, {-0.3, 0.5, 0}).value()});
  }
  {
    std::vector<double> angles = RandomAngles(17, random);
    angles.push_back(0.0);
    angles.push_back(0.5 * kPi);
    cases.push_back({"parallel2d",
                     MakeParallel2D({1, 83, 1.0, 0.85, 0.7, 0}, angles).value(),
                     VolumeGeometry::Create({61, 53, 1}, {0.9, 1.1, 1.0}, {0.6, -0.4, 0}).value()});
  }
  {
    // More views than one layered texture holds (2048): the back projector's passes.
    FanConeOptions cone;
    cone.detector = {7, 11, 2.0, 2.0, 0.3, 0.1};
    cone.source_origin_mm = 60;
    cone.origin_detector_mm = 30;
    cone.angles_rad = UniformAnglesRad(2100, 0.1, 2 * kPi);
    cases.push_back({"cone_2100_views", MakeCircularCone(cone).value(),
                     VolumeGeometry::Create({9, 11, 7}, {1.5, 1.5, 1.5}, {}).value()});
  }
  return cases;
}

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// How the back projector may read one-row detectors with kTexture: what it does by
// default (stage windows in shared memory, flat detectors), the layered 1D texture (v0.4)
// or the layered 2D texture (v0.3).
enum class OneRowMode { kStaged, kTexture1d, kTexture2d };

// What the back projector did for one-row detectors.
struct OneRowUse {
  bool staged = false;
  bool texture1d = false;
};

// The device-resident projector with a given sampler, from host arrays.
absl::Status RunSampler(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                        bool forward, BackProjectionWeighting weighting, const Array3D& input,
                        cuda::VectorSampler sampler, Array3D& output, bool half = false,
                        int32_t variant = cuda::kBpVariantDefault,
                        OneRowMode mode = OneRowMode::kStaged, OneRowUse* used = nullptr) {
  using namespace cuda;  // NOLINT: test-local
  TOMO_ASSIGN_OR_RETURN(ScopedDevice device, ScopedDevice::Enter(0));
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  {
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                          DeviceVectorProjector::Create(geometry, volume_geometry, stream.get()));
    projector.set_back_half(half);
    projector.set_back_variant(variant);
    projector.set_back_staged(mode == OneRowMode::kStaged);
    projector.set_back_one_row(mode != OneRowMode::kTexture2d);
    if (used != nullptr) {
      used->staged = projector.BackUsesStaged();
      used->texture1d = !used->staged && projector.BackUsesOneRowTexture();
    }
    TOMO_ASSIGN_OR_RETURN(auto d_in, DeviceBuffer<float>::Allocate(input.size(), stream.get()));
    TOMO_ASSIGN_OR_RETURN(auto d_out, DeviceBuffer<float>::Allocate(output.size(), stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_in.get(), input.data(), input.size_bytes(),
                                              cudaMemcpyHostToDevice, stream.get()));
    // Poison the device output too (0xFF bytes are NaN).
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_out.get(), 0xFF, output.size_bytes(), stream.get()));
    if (forward) {
      TOMO_RETURN_IF_ERROR(projector.Forward(d_in.get(), d_out.get(), sampler));
    } else {
      TOMO_RETURN_IF_ERROR(projector.Back(d_in.get(), weighting, d_out.get(), sampler));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(output.data(), d_out.get(), output.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
  }
  return absl::OkStatus();
}

class CudaVectorProjectorTest : public CudaVsCpuTest {};

TEST_F(CudaVectorProjectorTest, ForwardProjectMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    SCOPED_TRACE(c.name);
    const Array3D volume = RandomArray(c.volume.dims(), random_);
    Array3D expected(c.geometry.projection_dims(), kPoison);
    ASSERT_TRUE(cpu_.ForwardProject(c.geometry, c.volume, volume, expected).ok());
    Array3D texture(c.geometry.projection_dims(), kPoison);
    const absl::Status status = cuda_->ForwardProject(c.geometry, c.volume, volume, texture);
    ASSERT_TRUE(status.ok()) << status;
    Array3D exact(c.geometry.projection_dims(), kPoison);
    const absl::Status exact_status =
        RunSampler(c.geometry, c.volume, true, BackProjectionWeighting::kNone, volume,
                   cuda::VectorSampler::kExact, exact);
    ASSERT_TRUE(exact_status.ok()) << exact_status;
    // The 3D-texture sampler (the fallback for volumes with a side over 2048); the backend
    // above used the layered one.
    Array3D texture3d(c.geometry.projection_dims(), kPoison);
    const absl::Status texture3d_status =
        RunSampler(c.geometry, c.volume, true, BackProjectionWeighting::kNone, volume,
                   cuda::VectorSampler::kTexture, texture3d);
    ASSERT_TRUE(texture3d_status.ok()) << texture3d_status;
    ASSERT_TRUE(AllFinite(expected));
    ASSERT_TRUE(AllFinite(texture));
    ASSERT_TRUE(AllFinite(exact));
    ASSERT_TRUE(AllFinite(texture3d));
    const double texture_diff = RelativeMaxDifference(texture, expected);
    const double exact_diff = RelativeMaxDifference(exact, expected);
    const double texture3d_diff = RelativeMaxDifference(texture3d, expected);
    std::printf("[ measure  ] forward %-20s layered %.3g  texture3d %.3g  exact %.3g\n",
                c.name.c_str(), texture_diff, texture3d_diff, exact_diff);
    EXPECT_LE(texture_diff, kTextureTolerance);
    EXPECT_LE(texture3d_diff, kTextureTolerance);
    EXPECT_LE(exact_diff, kExactTolerance);
  }
}

TEST_F(CudaVectorProjectorTest, BackProjectMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    for (BackProjectionWeighting weighting :
         {BackProjectionWeighting::kNone, BackProjectionWeighting::kFdk}) {
      if (weighting == BackProjectionWeighting::kFdk && c.geometry.beam() != BeamKind::kCone) {
        continue;
      }
      const char* weight_name = weighting == BackProjectionWeighting::kFdk ? "fdk" : "none";
      SCOPED_TRACE(c.name + " " + weight_name);
      const Array3D projections = RandomArray(c.geometry.projection_dims(), random_);
      Array3D expected(c.volume.dims(), kPoison);
      ASSERT_TRUE(cpu_.BackProject(c.geometry, c.volume, projections, weighting, expected).ok());
      Array3D texture(c.volume.dims(), kPoison);
      const absl::Status status =
          cuda_->BackProject(c.geometry, c.volume, projections, weighting, texture);
      ASSERT_TRUE(status.ok()) << status;
      Array3D exact(c.volume.dims(), kPoison);
      const absl::Status exact_status =
          RunSampler(c.geometry, c.volume, false, weighting, projections,
                     cuda::VectorSampler::kExact, exact);
      ASSERT_TRUE(exact_status.ok()) << exact_status;
      // The texture sampler with float16 projections (an option of the device projector).
      Array3D half(c.volume.dims(), kPoison);
      const absl::Status half_status =
          RunSampler(c.geometry, c.volume, false, weighting, projections,
                     cuda::VectorSampler::kTexture, half, /*half=*/true);
      ASSERT_TRUE(half_status.ok()) << half_status;
      ASSERT_TRUE(AllFinite(expected));
      ASSERT_TRUE(AllFinite(texture));
      ASSERT_TRUE(AllFinite(exact));
      ASSERT_TRUE(AllFinite(half));
      const double texture_diff = RelativeMaxDifference(texture, expected);
      const double exact_diff = RelativeMaxDifference(exact, expected);
      const double half_diff = RelativeMaxDifference(half, expected);
      std::printf("[ measure  ] back %-4s %-20s texture %.3g  texture-f16 %.3g  exact %.3g\n",
                  weight_name, c.name.c_str(), texture_diff, half_diff, exact_diff);
      EXPECT_LE(texture_diff, kTextureTolerance);
      EXPECT_LE(half_diff, kTextureTolerance);
      EXPECT_LE(exact_diff, kExactTolerance);
    }
  }
}

// Every launch shape of the back projector (the 3D kernel's and, for one-slice volumes, the
// 2D kernel's), texture sampler, float32 and float16, with the FDK weight where it applies,
// against the CPU. One-slice volumes from one-row flat detectors (the 2D cases) stage
// detector windows in shared memory by default (v0.5, exact float interpolation:
// kExactTolerance; float16 does not apply), checked here, and take the layered 1D texture
// (v0.4) or the layered 2D texture (v0.3) when told; cylindrical one-row detectors take the
// 1D texture by default.
TEST_F(CudaVectorProjectorTest, BackProjectVariantsMatchCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    const BackProjectionWeighting weighting = c.geometry.beam() == BeamKind::kCone
                                                  ? BackProjectionWeighting::kFdk
                                                  : BackProjectionWeighting::kNone;
    const Array3D projections = RandomArray(c.geometry.projection_dims(), random_);
    Array3D expected(c.volume.dims(), kPoison);
    ASSERT_TRUE(cpu_.BackProject(c.geometry, c.volume, projections, weighting, expected).ok());
    const bool two_d = c.volume.size().z == 1 && c.geometry.rows() == 1;
    const bool flat = c.geometry.detector() == DetectorShape::kFlat;
    for (OneRowMode mode : {OneRowMode::kStaged, OneRowMode::kTexture1d, OneRowMode::kTexture2d}) {
      if (mode != OneRowMode::kStaged && !two_d) continue;
      for (int32_t variant = 0; variant < cuda::kBpVariantCount; ++variant) {
        for (bool half : {false, true}) {
          const char* mode_name = mode == OneRowMode::kStaged      ? ""
                                  : mode == OneRowMode::kTexture1d ? " 1d-texture"
                                                                   : " 2d-texture";
          SCOPED_TRACE(c.name + " variant " + std::to_string(variant) + (half ? " f16" : "") +
                       mode_name);
          Array3D texture(c.volume.dims(), kPoison);
          OneRowUse used;
          const absl::Status status =
              RunSampler(c.geometry, c.volume, false, weighting, projections,
                         cuda::VectorSampler::kTexture, texture, half, variant, mode, &used);
          ASSERT_TRUE(status.ok()) << status;
          EXPECT_EQ(used.staged, two_d && flat && mode == OneRowMode::kStaged);
          EXPECT_EQ(used.texture1d, two_d && mode != OneRowMode::kTexture2d && !used.staged);
          ASSERT_TRUE(AllFinite(texture));
          const double diff = RelativeMaxDifference(texture, expected);
          std::printf("[ measure  ] back-variant %-20s v%d%s%s texture %.3g\n", c.name.c_str(),
                      variant, half ? "-f16" : "    ",
                      used.staged ? "-staged" : (used.texture1d ? "-1d" : "   "), diff);
          EXPECT_LE(diff, used.staged ? kExactTolerance : kTextureTolerance);
        }
      }
    }
  }
}

// The staged one-row back projection where windows do not fit the shared buffer (a detector
// much finer than the pixels: some views of a chunk read global memory directly) and where
// tiles reach behind a fan's source (the source inside the image's bounding box, outside
// its pixels' footprint on that side), against the CPU, every launch shape. Near the source
// the column a / d and the FDK weight 1 / d^2 magnify float32 rounding (d is small there),
// so the bound is kExactTolerance or twice what the plain-load float kernel of
// vector_back.cu (the exact sampler) reaches on the same input, whichever is larger.
TEST_F(CudaVectorProjectorTest, StagedBackProjectionEdgeCasesMatchCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  std::vector<Case> cases;
  {
    const VolumeGeometry volume = VolumeGeometry::Create({70, 45, 1}, {1.0, 1.3, 1.0},
                                                         {0.4, -0.2, 0}).value();
    VectorGeometry geometry =
        MakeParallel2D({1, 1500, 1.0, 0.07, 3.1, 0}, RandomAngles(37, random_)).value();
    cases.push_back({"parallel-fine-detector", std::move(geometry), volume});
  }
  {
    const VolumeGeometry volume = VolumeGeometry::Create({64, 64, 1}, {1.0, 1.0, 1.0},
                                                         {0, 0, 0}).value();
    FanConeOptions fan;
    fan.detector = {1, 301, 1.0, 0.5, -2.5, 0};
    // The source circles at 40 mm, inside the 64 mm square's corners; within 30 degrees of
    // an axis it stays outside the square (a source inside is refused) while the plane
    // through it parallel to the detector cuts the square's far corner.
    fan.source_origin_mm = 40;
    fan.origin_detector_mm = 60;
    std::uniform_real_distribution<double> near_axis(-kPi / 6, kPi / 6);
    for (int i = 0; i < 44; ++i) fan.angles_rad.push_back(0.5 * kPi * (i % 4) + near_axis(random_));
    cases.push_back({"fan-source-near", MakeFan2D(fan).value(), volume});
  }
  for (const Case& c : cases) {
    for (BackProjectionWeighting weighting :
         {BackProjectionWeighting::kNone, BackProjectionWeighting::kFdk}) {
      if (weighting == BackProjectionWeighting::kFdk && c.geometry.beam() != BeamKind::kCone) {
        continue;
      }
      const Array3D projections = RandomArray(c.geometry.projection_dims(), random_);
      Array3D expected(c.volume.dims(), kPoison);
      ASSERT_TRUE(cpu_.BackProject(c.geometry, c.volume, projections, weighting, expected).ok());
      for (int32_t variant = 0; variant < cuda::kBpVariantCount; ++variant) {
        SCOPED_TRACE(c.name + " variant " + std::to_string(variant));
        Array3D staged(c.volume.dims(), kPoison);
        OneRowUse used;
        const absl::Status status =
            RunSampler(c.geometry, c.volume, false, weighting, projections,
                       cuda::VectorSampler::kTexture, staged, false, variant,
                       OneRowMode::kStaged, &used);
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_TRUE(used.staged);
        Array3D exact(c.volume.dims(), kPoison);
        const absl::Status exact_status =
            RunSampler(c.geometry, c.volume, false, weighting, projections,
                       cuda::VectorSampler::kExact, exact);
        ASSERT_TRUE(exact_status.ok()) << exact_status;
        ASSERT_TRUE(AllFinite(staged));
        ASSERT_TRUE(AllFinite(exact));
        const double diff = RelativeMaxDifference(staged, expected);
        const double exact_diff = RelativeMaxDifference(exact, expected);
        std::printf("[ measure  ] staged-edge %-24s %s v%d staged %.3g  exact %.3g\n",
                    c.name.c_str(), weighting == BackProjectionWeighting::kFdk ? "fdk " : "none",
                    variant, diff, exact_diff);
        EXPECT_LE(diff, std::max(kExactTolerance, 2 * exact_diff));
      }
    }
  }
}

// The device-resident weighted ramp filter (DeviceRowFilter, for the benchmark's FDK
// total) against the CPU backend's FilterRows of the weighted rows. Both are float FFTs of
// the same zero-padded rows: kExactTolerance.
TEST_F(CudaVectorProjectorTest, DeviceRowFilterMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const int64_t views = 5, rows = 7, columns = 67;
  const RampFilter filter = RampFilter::Create(FilterOptions{}, columns, 0.7).value();
  const Array3D input = RandomArray({views, rows, columns}, random_);
  std::vector<float> weight(static_cast<size_t>(rows * columns));
  std::uniform_real_distribution<float> uniform(0.5f, 1.0f);
  for (float& w : weight) w = uniform(random_);
  Array3D expected = input.Clone();
  for (int64_t v = 0; v < views; ++v) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < columns; ++k) {
        expected.at(v, r, k) *= weight[static_cast<size_t>(r * columns + k)];
      }
    }
  }
  ASSERT_TRUE(cpu_.FilterRows(filter, expected).ok());
  Array3D output({views, rows, columns}, kPoison);
  const absl::Status status = [&]() -> absl::Status {
    using namespace cuda;  // NOLINT: test-local
    TOMO_ASSIGN_OR_RETURN(ScopedDevice device, ScopedDevice::Enter(0));
    TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
    TOMO_ASSIGN_OR_RETURN(auto d_data, DeviceBuffer<float>::Allocate(input.size(), stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_data.get(), input.data(), input.size_bytes(),
                                              cudaMemcpyHostToDevice, stream.get()));
    {
      TOMO_ASSIGN_OR_RETURN(DeviceRowFilter row_filter,
                            DeviceRowFilter::Create(filter, views * rows, rows, weight,
                                                    stream.get()));
      // Twice: the second call reuses the padding (zeroed once by Create) and must not see
      // the first call's data; the second works in place.
      TOMO_ASSIGN_OR_RETURN(auto d_first,
                            DeviceBuffer<float>::Allocate(input.size(), stream.get()));
      TOMO_RETURN_IF_ERROR(row_filter.Apply(d_data.get(), d_first.get()));
      TOMO_RETURN_IF_ERROR(row_filter.Apply(d_data.get(), d_data.get()));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(output.data(), d_data.get(), output.size_bytes(),
                                                cudaMemcpyDeviceToHost, stream.get()));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
    }
    return absl::OkStatus();
  }();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(AllFinite(output));
  const double diff = RelativeMaxDifference(output, expected);
  std::printf("[ measure  ] device row filter %.3g\n", diff);
  EXPECT_LE(diff, kExactTolerance);
}

TEST_F(CudaVectorProjectorTest, RefusesBadArguments) {
  const VolumeGeometry volume = VolumeGeometry::Create({8, 8, 8}, {1, 1, 1}, {}).value();
  const VectorGeometry parallel =
      MakeParallel3D({4, 6, 1, 1, 0, 0}, UniformAnglesRad(5, 0, kPi)).value();
  Array3D projections(parallel.projection_dims(), 1.0f);
  Array3D out(volume.dims());
  EXPECT_EQ(cuda_->BackProject(parallel, volume, projections, BackProjectionWeighting::kFdk, out)
                .code(),
            absl::StatusCode::kInvalidArgument);
  Array3D wrong_volume({8, 8, 7});
  EXPECT_EQ(cuda_->ForwardProject(parallel, volume, wrong_volume, projections).code(),
            absl::StatusCode::kInvalidArgument);
  Array3D wrong_projections({5, 4, 7});
  EXPECT_EQ(cuda_->BackProject(parallel, volume, wrong_projections,
                               BackProjectionWeighting::kNone, out)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
