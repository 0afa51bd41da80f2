// Tests of ReconstructIcdCpu (core/statistical/icd_cpu.cc): the cost decreases every
// iteration and the tracked cost equals the cost evaluated from scratch; the multi-voxel
// and single-voxel updates reach the same cost; the reconstruction approaches the analytic
// phantom; no z-stripes in a uniform region (a new visiting order every iteration);
// progress and cancellation; bad inputs refused naming the argument.
#include "core/statistical/icd_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/statistical/pwls_cost.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"
#include "tests/core/statistical/icd_test_case.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;

double RmsError(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// The prior for the test case's dose (kIncidentPhotons): sigma 3e-4 /mm and c = 1 (the
// transition at 3e-4 /mm, about the noise of one voxel), chosen by the error against the
// phantom over sigma in {3e-4, 1e-3, 2e-3} and c in {0.1, 1}.
IcdOptions Options(const VolumeGeometry& volume, GroupingMode grouping, int64_t iterations) {
  IcdOptions options;
  options.iterations = iterations;
  options.prior = DefaultQggmrfPrior(volume);
  options.prior.sigma = 3e-4;
  options.prior.c = 1.0;
  options.grouping = grouping;
  options.columns_per_step = 1;  // the literature's MVU and SVU; tests name other values
  return options;
}

TEST(IcdCpuTest, CostDecreasesEveryIterationAndMatchesTheCostFromScratch) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (bool helical : {false, true}) {
    SCOPED_TRACE(helical ? "helical" : "circular");
    const IcdTestCase c = MakeIcdTestCase(random, helical);
    const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
    const IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 5);
    auto result = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->iterations.size(), 5u);
    double previous = result->initial_cost;
    for (const IcdIterationRecord& record : result->iterations) {
      std::printf("[ measure ] %s iteration %lld: cost %.6e (data %.4e prior %.4e)\n",
                  helical ? "helical" : "circular", static_cast<long long>(record.iteration),
                  record.cost, record.data_term, record.prior_term);
      EXPECT_LT(record.cost, previous) << "iteration " << record.iteration;
      previous = record.cost;
    }
    // The tracked residual accumulates float32 rounding: it must agree with a fresh
    // forward projection to 1e-4 of the cost.
    const PwlsCost fresh =
        EvaluatePwlsCost(sf, c.line_integrals, c.weights, result->volume, options.prior).value();
    EXPECT_NEAR(fresh.total() / result->iterations.back().cost, 1.0, 1e-4);
    for (int64_t i = 0; i < result->volume.size(); ++i) {
      ASSERT_GE(result->volume.data()[i], 0.0f);
    }
  }
}

TEST(IcdCpuTest, MultiVoxelAndSingleVoxelUpdatesReachTheSameCost) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const IcdTestCase c = MakeIcdTestCase(random, /*helical=*/false);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  const Array3D truth = c.phantom.Rasterize(c.volume, 3);
  // Started, as in the product, from FDK of the same data.
  CpuBackend cpu;
  const Array3D fdk =
      Fdk(c.geometry, c.volume, c.line_integrals, FdkOptions{}, cpu, RunContext{}).value();
  constexpr int64_t kIterations = 4;
  auto mvu = ReconstructIcdCpu(sf, c.line_integrals, c.weights, &fdk,
                               Options(c.volume, GroupingMode::kMultiVoxel, kIterations), {});
  auto svu = ReconstructIcdCpu(sf, c.line_integrals, c.weights, &fdk,
                               Options(c.volume, GroupingMode::kSingleVoxel, kIterations), {});
  IcdOptions paired_options = Options(c.volume, GroupingMode::kMultiVoxel, kIterations);
  paired_options.columns_per_step = 4;
  auto paired = ReconstructIcdCpu(sf, c.line_integrals, c.weights, &fdk, paired_options, {});
  ASSERT_TRUE(mvu.ok() && svu.ok() && paired.ok());
  EXPECT_GT(paired->paired_columns, 0);
  EXPECT_LT(paired->steps, mvu->steps);
  EXPECT_GT(mvu->mean_group_size, 2.0);  // the multi-voxel update does group voxels
  EXPECT_EQ(svu->max_group_size, 1);
  for (int64_t k = 0; k < kIterations; ++k) {
    std::printf("[ measure ] iteration %lld: cost MVU %.6e SVU %.6e\n",
                static_cast<long long>(k + 1), mvu->iterations[k].cost, svu->iterations[k].cost);
  }
  // The same cost within 0.1% of the decrease from the start (the two visit voxels in
  // different orders, so their iterates differ; both descend to the one minimiser).
  // Measured: 2e-6 to 2e-5.
  const double decrease = mvu->initial_cost - svu->iterations.back().cost;
  const double gap = std::abs(mvu->iterations.back().cost - svu->iterations.back().cost);
  const double paired_gap =
      std::abs(paired->iterations.back().cost - svu->iterations.back().cost);
  std::printf("[ measure ] cost gap / decrease after %lld iterations: MVU-SVU %.2e, MVU with "
              "up to 4 columns per step-SVU %.2e (%lld of %lld steps)\n",
              static_cast<long long>(kIterations), gap / decrease, paired_gap / decrease,
              static_cast<long long>(paired->steps), static_cast<long long>(mvu->steps));
  EXPECT_LT(gap / decrease, 1e-3);
  EXPECT_LT(paired_gap / decrease, 1e-3);
  for (size_t k = 1; k < paired->iterations.size(); ++k) {
    EXPECT_LT(paired->iterations[k].cost, paired->iterations[k - 1].cost);
  }
  // Both reduce the error against the phantom well below FDK's (measured: FDK 1.7e-3,
  // ICD 0.6e-3 RMS per mm).
  const double fdk_error = RmsError(fdk, truth);
  const double mvu_error = RmsError(mvu->volume, truth);
  const double svu_error = RmsError(svu->volume, truth);
  std::printf("[ measure ] RMS error vs phantom: FDK %.3e MVU %.3e SVU %.3e\n", fdk_error,
              mvu_error, svu_error);
  EXPECT_LT(mvu_error, 0.6 * fdk_error);
  EXPECT_LT(std::abs(mvu_error - svu_error), 0.05 * svu_error);
}

// ICD's fixed point against the minimiser found without its update formula: cyclic exact
// coordinate descent that minimises the true cost (EvaluatePwlsCost: a fresh projection,
// the q-GGMRF itself, not its surrogate) over each voxel in [0, upper] by golden-section
// search. The cost is convex, so both must reach its minimum over x >= 0. A tiny volume
// (4 x 3 x 5 voxels, anisotropic and off-centre) keeps the search to a few seconds.
TEST(IcdCpuTest, ConvergesToTheMinimiserOfAnIndependentSearch) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const VolumeGeometry volume =
      VolumeGeometry::Create({4, 3, 5}, {0.9, 1.1, 0.7}, {0.3, -0.2, 0.1}).value();
  FanConeOptions cone;
  cone.detector = {7, 9, 1.0, 1.2, 0.2, 0};
  cone.source_origin_mm = 40;
  cone.origin_detector_mm = 30;
  cone.angles_rad = UniformAnglesRad(10, 0.3, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  // Data: a random non-negative volume's projection with Gaussian noise, weights random.
  Array3D truth(volume.dims());
  for (int64_t i = 0; i < truth.size(); ++i) truth.data()[i] = static_cast<float>(0.02 * uniform(random));
  Array3D y = sf.Forward(truth).value();
  Array3D w(y.dims());
  std::normal_distribution<double> normal(0.0, 0.01);
  for (int64_t i = 0; i < y.size(); ++i) {
    y.data()[i] += static_cast<float>(normal(random));
    w.data()[i] = static_cast<float>(500 + 1500 * uniform(random));
  }
  IcdOptions options;
  options.iterations = 150;
  options.prior = DefaultQggmrfPrior(volume);
  options.prior.sigma = 5e-3;
  options.prior.c = 0.5;
  auto icd = ReconstructIcdCpu(sf, y, w, nullptr, options, {});
  ASSERT_TRUE(icd.ok()) << icd.status();

  // The cost of x with voxel i set to t, from A's columns (VoxelFootprint) and the residual
  // of x kept in float64, and the prior's value (QggmrfPriorValue) over the whole volume.
  const Size3 n = volume.size();
  std::vector<std::vector<FootprintEntry>> columns(static_cast<size_t>(truth.size()));
  for (int64_t iz = 0; iz < n.z; ++iz) {
    for (int64_t iy = 0; iy < n.y; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        columns[static_cast<size_t>((iz * n.y + iy) * n.x + ix)] = sf.VoxelFootprint(ix, iy, iz);
      }
    }
  }
  Array3D x(volume.dims());  // zeros
  std::vector<double> residual(static_cast<size_t>(y.size()));
  for (int64_t i = 0; i < y.size(); ++i) residual[static_cast<size_t>(i)] = -y.data()[i];
  auto at = [&](const FootprintEntry& f) {
    return static_cast<size_t>((f.view * y.dims().d1 + f.row) * y.dims().d2 + f.column);
  };
  auto data_term = [&] {
    double sum = 0;
    for (int64_t i = 0; i < y.size(); ++i) {
      sum += 0.5 * w.data()[i] * residual[static_cast<size_t>(i)] * residual[static_cast<size_t>(i)];
    }
    return sum;
  };
  auto cost = [&](int64_t voxel, double t, double data) {
    const double old_value = x.data()[voxel];
    for (const FootprintEntry& f : columns[static_cast<size_t>(voxel)]) {
      const double e = residual[at(f)], moved = e + f.weight * (t - old_value);
      data += 0.5 * w.data()[at(f)] * (moved * moved - e * e);
    }
    x.data()[voxel] = static_cast<float>(t);
    const double prior = QggmrfPriorValue(options.prior, n, x.data(), 1, n.x, n.x * n.y);
    x.data()[voxel] = static_cast<float>(old_value);
    return data + prior;
  };
  constexpr double kGolden = 0.6180339887498949;
  for (int sweep = 0; sweep < 40; ++sweep) {
    for (int64_t i = 0; i < x.size(); ++i) {
      const double data = data_term();
      double lo = 0, hi = std::max(0.1, 4.0 * x.data()[i]);
      double a = hi - kGolden * (hi - lo), b = lo + kGolden * (hi - lo);
      double fa = cost(i, a, data), fb = cost(i, b, data);
      for (int k = 0; k < 40; ++k) {
        if (fa < fb) {
          hi = b; b = a; fb = fa; a = hi - kGolden * (hi - lo);
          fa = cost(i, a, data);
        } else {
          lo = a; a = b; fa = fb; b = lo + kGolden * (hi - lo);
          fb = cost(i, b, data);
        }
      }
      const double t = 0.5 * (lo + hi);
      for (const FootprintEntry& f : columns[static_cast<size_t>(i)]) {
        residual[at(f)] += f.weight * (t - x.data()[i]);
      }
      x.data()[i] = static_cast<float>(t);
    }
  }
  // Both final costs from scratch by EvaluatePwlsCost.
  auto fresh = [&](const Array3D& v) {
    return EvaluatePwlsCost(sf, y, w, v, options.prior).value().total();
  };
  const double searched = fresh(x);
  const double icd_cost = fresh(icd->volume);
  std::printf("[ measure ] cost: ICD %.9e, independent search %.9e; RMS volume difference %.3e "
              "(RMS volume %.3e)\n",
              icd_cost, searched, RmsError(icd->volume, x), RmsError(x, Array3D(volume.dims())));
  EXPECT_NEAR(icd_cost / searched, 1.0, 1e-6);
  EXPECT_LT(RmsError(icd->volume, x), 1e-3 * RmsError(x, Array3D(volume.dims())));
}

// The part of the error's variance in a uniform region that is constant along z in each
// (x, y) column: the variance of the columns' means over the total (columns of at least 8
// masked voxels). Independent errors give about 1 / (the columns' length); z-stripes, each
// column offset as a whole, give a large part. Uniform: the phantom's value equals that of
// every voxel within 2 in x and y and 1 in z, and is above 0.
double ColumnConstantFraction(const Array3D& x, const Array3D& truth) {
  const Dims3 d = truth.dims();
  std::vector<uint8_t> mask(static_cast<size_t>(truth.size()), 0);
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (int64_t z = 1; z + 1 < d.d0; ++z) {
    for (int64_t y = 2; y + 2 < d.d1; ++y) {
      for (int64_t xx = 2; xx + 2 < d.d2; ++xx) {
        const float v = truth.at(z, y, xx);
        bool same = v > 0;
        for (int64_t dz = -1; dz <= 1 && same; ++dz) {
          for (int64_t dy = -2; dy <= 2 && same; ++dy) {
            for (int64_t dx = -2; dx <= 2 && same; ++dx) {
              same = truth.at(z + dz, y + dy, xx + dx) == v;
            }
          }
        }
        if (!same) continue;
        mask[static_cast<size_t>((z * d.d1 + y) * d.d2 + xx)] = 1;
        const double e = static_cast<double>(x.at(z, y, xx)) - v;
        sum += e;
        sum2 += e * e;
        ++count;
      }
    }
  }
  const double mean = sum / static_cast<double>(count);
  const double variance = sum2 / static_cast<double>(count) - mean * mean;
  double between = 0;
  int64_t in_columns = 0;
  for (int64_t y = 0; y < d.d1; ++y) {
    for (int64_t xx = 0; xx < d.d2; ++xx) {
      double cs = 0;
      int64_t cn = 0;
      for (int64_t z = 0; z < d.d0; ++z) {
        if (!mask[static_cast<size_t>((z * d.d1 + y) * d.d2 + xx)]) continue;
        cs += static_cast<double>(x.at(z, y, xx)) - truth.at(z, y, xx);
        ++cn;
      }
      if (cn < 8) continue;
      between += static_cast<double>(cn) * (cs / cn - mean) * (cs / cn - mean);
      in_columns += cn;
    }
  }
  return between / static_cast<double>(in_columns) / variance;
}

// z-stripes (bench/NOTES.md, icd-noise-study): ICD visiting the columns in one order for
// all iterations left, from the FDK start, errors constant along z in each column that
// further iterations barely removed; a new order every iteration removes them. A reduced
// case of the literature's geometry (its distances, pixels and voxels; 48 x 48 x 16 voxels,
// 160 views) with the Shepp-Logan head at CT attenuation and Poisson noise at 2e4 photons,
// the default prior, 3 iterations: the part of the uniform region's error constant along z
// stays under 0.2 (measured 0.12-0.15; FDK's 0.19, from its interpolation between rows).
// The old behaviour, one order for all iterations (here: one run of one iteration at a time,
// each the first iteration of the same seed), is checked to show the stripes (measured
// 0.36-0.39), so that the measure can tell.
TEST(IcdCpuTest, NewOrderEveryIterationLeavesNoZStripesInAUniformRegion) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry volume =
      VolumeGeometry::Create({48, 48, 16}, {0.415, 0.415, 0.3}, {}).value();
  FanConeOptions cone;
  cone.detector = {16, 141, 0.755, 0.384, 0, 0};
  cone.source_origin_mm = 647.7;
  cone.origin_detector_mm = 1147.7 - 647.7;
  cone.angles_rad = UniformAnglesRad(160, 0, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  std::vector<Ellipsoid> ellipsoids = EllipsoidPhantom::SheppLogan3D(9.0).ellipsoids();
  for (Ellipsoid& e : ellipsoids) e.density *= 0.02;
  const EllipsoidPhantom phantom(std::move(ellipsoids));
  const double z_lo = volume.z_mm(0) - 0.15, z_hi = volume.z_mm(15) + 0.15;
  const Array3D exact = phantom.Project(geometry, 1, z_lo, z_hi);
  Array3D line_integrals(exact.dims()), weights(exact.dims());
  constexpr double kPhotons = 2e4;
  for (int64_t i = 0; i < exact.size(); ++i) {
    const double mean = kPhotons * std::exp(-static_cast<double>(exact.data()[i]));
    const double counts =
        std::max(1.0, static_cast<double>(std::poisson_distribution<int64_t>(mean)(random)));
    line_integrals.data()[i] = static_cast<float>(-std::log(counts / kPhotons));
    weights.data()[i] = static_cast<float>(counts);
  }
  const Array3D truth = phantom.Rasterize(volume, 2);
  CpuBackend cpu;
  Array3D fdk = Fdk(geometry, volume, line_integrals, FdkOptions{}, cpu, RunContext{}).value();
  for (int64_t i = 0; i < fdk.size(); ++i) fdk.data()[i] = std::max(fdk.data()[i], 0.0f);
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  IcdOptions options;
  options.prior = DefaultQggmrfPrior(volume);
  options.iterations = 3;
  auto icd = ReconstructIcdCpu(sf, line_integrals, weights, &fdk, options, {});
  ASSERT_TRUE(icd.ok()) << icd.status();
  options.iterations = 1;
  Array3D one_order = fdk.Clone();
  for (int iteration = 0; iteration < 3; ++iteration) {
    auto step = ReconstructIcdCpu(sf, line_integrals, weights, &one_order, options, {});
    ASSERT_TRUE(step.ok()) << step.status();
    one_order = std::move(step->volume);
  }
  const double fdk_fraction = ColumnConstantFraction(fdk, truth);
  const double icd_fraction = ColumnConstantFraction(icd->volume, truth);
  const double one_order_fraction = ColumnConstantFraction(one_order, truth);
  std::printf("[ measure ] error constant along z in the uniform region (fraction of its "
              "variance): FDK %.3f, ICD %.3f, ICD with one order for all iterations %.3f\n",
              fdk_fraction, icd_fraction, one_order_fraction);
  EXPECT_LT(icd_fraction, 0.2);
  EXPECT_GT(one_order_fraction, 0.25);
}

TEST(IcdCpuTest, ReportsProgressWithTheCostAndStopsWhenCancelled) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const IcdTestCase c = MakeIcdTestCase(random, false, {9, 8, 7});
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  std::vector<ProgressUpdate> updates;
  RunContext context;
  context.on_progress = [&](const ProgressUpdate& u) { updates.push_back(u); };
  auto result = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr,
                                  Options(c.volume, GroupingMode::kMultiVoxel, 3), context);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(updates.size(), 3u);
  for (size_t k = 0; k < updates.size(); ++k) {
    EXPECT_EQ(updates[k].stage, "icd");
    EXPECT_EQ(updates[k].iteration, k + 1);
    EXPECT_EQ(updates[k].iterations_total, 3u);
    EXPECT_DOUBLE_EQ(updates[k].cost, result->iterations[k].cost);
    EXPECT_GT(updates[k].relative_residual, 0);
  }
  EXPECT_DOUBLE_EQ(updates.back().fraction, 1.0);

  int checks = 0;
  RunContext cancelling;
  cancelling.is_cancelled = [&] { return ++checks > 20; };  // after 20 groups
  auto cancelled = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr,
                                     Options(c.volume, GroupingMode::kMultiVoxel, 3), cancelling);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(cancelled.status().message(), HasSubstr("icd / iteration 1 / column"));
}

TEST(IcdCpuTest, StartVolumeIsUsedAndClippedAndBadInputsAreRefused) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const IcdTestCase c = MakeIcdTestCase(random, false);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 1);

  // Starting from the phantom itself (with a negative voxel, clipped to 0) the cost starts
  // far lower than from zero.
  Array3D start = c.phantom.Rasterize(c.volume, 2);
  start.at(0, 0, 0) = -1.0f;
  auto from_truth = ReconstructIcdCpu(sf, c.line_integrals, c.weights, &start, options, {});
  auto from_zero = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
  ASSERT_TRUE(from_truth.ok() && from_zero.ok());
  EXPECT_LT(from_truth->initial_cost, 0.1 * from_zero->initial_cost);

  Array3D negative_weights = c.weights.Clone();
  negative_weights.data()[5] = -1;
  auto bad_weights =
      ReconstructIcdCpu(sf, c.line_integrals, negative_weights, nullptr, options, {});
  ASSERT_FALSE(bad_weights.ok());
  EXPECT_THAT(bad_weights.status().message(), HasSubstr("weights: element 5"));

  // Several bad values spread over the array (the check runs on threads, a chunk each):
  // the first one is named.
  Array3D bad_data = c.line_integrals.Clone();
  const int64_t count = bad_data.size();
  const int64_t first_bad = std::uniform_int_distribution<int64_t>(count / 3, count / 2)(random);
  bad_data.data()[count - 1] = std::numeric_limits<float>::infinity();
  bad_data.data()[first_bad + count / 4] = std::nanf("");
  bad_data.data()[first_bad] = std::nanf("");
  auto bad_values = ReconstructIcdCpu(sf, bad_data, c.weights, nullptr, options, {});
  ASSERT_FALSE(bad_values.ok());
  EXPECT_THAT(bad_values.status().message(),
              HasSubstr(absl::StrCat("line_integrals: element ", first_bad, " is nan")));

  Array3D wrong_start({15, 17, 18});
  auto bad_start =
      ReconstructIcdCpu(sf, c.line_integrals, c.weights, &wrong_start, options, {});
  ASSERT_FALSE(bad_start.ok());
  EXPECT_THAT(bad_start.status().message(), HasSubstr("start_volume"));

  options.prior.q = 2.5;
  auto bad_prior = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
  ASSERT_FALSE(bad_prior.ok());
  EXPECT_EQ(bad_prior.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_prior.status().message(), HasSubstr("prior.q"));

  options = Options(c.volume, GroupingMode::kMultiVoxel, 1);
  options.columns_per_step = 5;
  auto bad_step = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
  ASSERT_FALSE(bad_step.ok());
  EXPECT_THAT(bad_step.status().message(), HasSubstr("columns_per_step: 5"));

  options = Options(c.volume, GroupingMode::kMultiVoxel, 0);
  auto bad_iterations =
      ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
  ASSERT_FALSE(bad_iterations.ok());
  EXPECT_THAT(bad_iterations.status().message(), HasSubstr("iterations: 0"));
}

}  // namespace
}  // namespace tomo::core::statistical
