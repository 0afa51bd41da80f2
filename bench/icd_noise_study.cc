// icd-noise-study: on the CPU, ICD against FDK on a reduced case of the multi-voxel-update
// literature's geometry (its source and detector distances, 0.384 x 0.755 mm pixels, 391
// views over 360 degrees, 0.415 x 0.415 x 0.3 mm voxels; a volume of --size voxels and a
// detector just wide and tall enough for it), on the 3D Shepp-Logan phantom scaled to the
// volume (densities x 0.02 /mm) with Poisson noise: the noise and the error against the
// phantom per iteration, for several priors, and what the z-stripes seen in ICD's coronal
// and sagittal slices are made of.
//
// Measured in the phantom's uniform region (voxels whose neighbours within 2 voxels in x
// and y and 1 in z have the same phantom value), on the error e = x - phantom:
//   noise      the standard deviation of e;
//   column     the part of e's variance that is constant along z in each (x, y) column:
//              the variance of the columns' means over the total (for errors independent
//              between slices it is about 1 / the column's masked length);
//   rz1, rz2   e's correlation between slices 1 and 2 apart; rx1 between columns 1 apart
//              in x;
//   slice      the standard deviation over slices of the slices' mean e (a bias per slice);
//   period-s   the largest difference between the mean e of slices iz = r mod s, r < s, s
//              the groups' stride (a bias per group of the multi-voxel update).
// Besides, the RMS error against the phantom over the whole volume.
//
// --priors takes sigma:c pairs (sigma per mm); each runs --iterations ICD iterations from
// the FDK start (the product's), with --columns-per-step, as the product does (a new order
// of the columns every iteration). --restart runs one iteration at a time with the same
// order each time (how ICD ran before: one order for all iterations); --per-iteration-order
// also runs one at a time, with a new column order (and partner search) each time. --png
// writes the central slices (axial, coronal, sagittal) of phantom, FDK and each prior's
// last iterate.
//
//   build/bin/icd-noise-study --size 128,128,32 --iterations 8 --priors 1e-3:0.1,3e-4:1
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/central_slices_png.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/base/parallel_for.h"
#include "core/geometry/geometry_builders.h"
#include "core/io/png_preview.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/statistical/icd_cpu.h"
#include "core/statistical/qggmrf_prior.h"
#include "core/statistical/separable_footprint.h"
#include "core/statistical/z_voxel_groups.h"

namespace tomo::bench {
namespace {

using core::Array3D;
using namespace core::statistical;

constexpr double kPi = 3.14159265358979323846;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The uniform region: voxels whose phantom value equals that of every voxel within 2 in x
// and y and 1 in z, and is above zero (inside the head, off the skull's edge).
std::vector<uint8_t> UniformMask(const Array3D& truth) {
  const core::Dims3 d = truth.dims();  // (z, y, x)
  std::vector<uint8_t> mask(static_cast<size_t>(truth.size()), 0);
  for (int64_t z = 1; z + 1 < d.d0; ++z) {
    for (int64_t y = 2; y + 2 < d.d1; ++y) {
      for (int64_t x = 2; x + 2 < d.d2; ++x) {
        const float v = truth.at(z, y, x);
        if (!(v > 0)) continue;
        bool same = true;
        for (int64_t dz = -1; dz <= 1 && same; ++dz) {
          for (int64_t dy = -2; dy <= 2 && same; ++dy) {
            for (int64_t dx = -2; dx <= 2 && same; ++dx) {
              same = truth.at(z + dz, y + dy, x + dx) == v;
            }
          }
        }
        mask[static_cast<size_t>((z * d.d1 + y) * d.d2 + x)] = same ? 1 : 0;
      }
    }
  }
  return mask;
}

struct Metrics {
  double rms_error = 0, noise = 0, column = 0, rz1 = 0, rz2 = 0, rx1 = 0, slice = 0, period = 0;
};

Metrics Measure(const Array3D& x, const Array3D& truth, const std::vector<uint8_t>& mask,
                int stride) {
  const core::Dims3 d = truth.dims();
  Metrics m;
  double sum2 = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double e = static_cast<double>(x.data()[i]) - truth.data()[i];
    sum2 += e * e;
  }
  m.rms_error = std::sqrt(sum2 / static_cast<double>(x.size()));
  auto index = [&](int64_t z, int64_t y, int64_t xx) { return (z * d.d1 + y) * d.d2 + xx; };
  auto err = [&](int64_t i) { return static_cast<double>(x.data()[i]) - truth.data()[i]; };
  double s = 0, s2 = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    if (!mask[static_cast<size_t>(i)]) continue;
    s += err(i);
    s2 += err(i) * err(i);
    ++count;
  }
  if (count < 2) return m;
  const double mean = s / count;
  const double variance = s2 / count - mean * mean;
  m.noise = std::sqrt(std::max(0.0, variance));
  // Lagged correlations of the centred error over masked pairs.
  auto correlation = [&](int64_t dz, int64_t dx) {
    double c = 0;
    int64_t n = 0;
    for (int64_t z = 0; z + dz < d.d0; ++z) {
      for (int64_t y = 0; y < d.d1; ++y) {
        for (int64_t xx = 0; xx + dx < d.d2; ++xx) {
          const int64_t a = index(z, y, xx), b = index(z + dz, y, xx + dx);
          if (!mask[static_cast<size_t>(a)] || !mask[static_cast<size_t>(b)]) continue;
          c += (err(a) - mean) * (err(b) - mean);
          ++n;
        }
      }
    }
    return n > 0 ? c / n / variance : 0.0;
  };
  m.rz1 = correlation(1, 0);
  m.rz2 = correlation(2, 0);
  m.rx1 = correlation(0, 1);
  // Column means (columns with at least 8 masked voxels), weighted by their voxels.
  double between = 0;
  int64_t in_columns = 0;
  for (int64_t y = 0; y < d.d1; ++y) {
    for (int64_t xx = 0; xx < d.d2; ++xx) {
      double cs = 0;
      int64_t cn = 0;
      for (int64_t z = 0; z < d.d0; ++z) {
        const int64_t i = index(z, y, xx);
        if (!mask[static_cast<size_t>(i)]) continue;
        cs += err(i);
        ++cn;
      }
      if (cn < 8) continue;
      const double cm = cs / cn - mean;
      between += cn * cm * cm;
      in_columns += cn;
    }
  }
  m.column = in_columns > 0 ? between / in_columns / variance : 0;
  // Slice means and the groups' period.
  std::vector<double> slice_sum(static_cast<size_t>(d.d0), 0);
  std::vector<int64_t> slice_n(static_cast<size_t>(d.d0), 0);
  for (int64_t z = 0; z < d.d0; ++z) {
    for (int64_t i = index(z, 0, 0); i < index(z + 1, 0, 0); ++i) {
      if (!mask[static_cast<size_t>(i)]) continue;
      slice_sum[static_cast<size_t>(z)] += err(i);
      ++slice_n[static_cast<size_t>(z)];
    }
  }
  double ss = 0, ss2 = 0;
  int64_t slices = 0;
  std::vector<double> class_sum(static_cast<size_t>(stride), 0);
  std::vector<int64_t> class_n(static_cast<size_t>(stride), 0);
  for (int64_t z = 0; z < d.d0; ++z) {
    if (slice_n[static_cast<size_t>(z)] < 16) continue;
    const double sm = slice_sum[static_cast<size_t>(z)] / slice_n[static_cast<size_t>(z)];
    ss += sm;
    ss2 += sm * sm;
    ++slices;
    class_sum[static_cast<size_t>(z % stride)] += slice_sum[static_cast<size_t>(z)];
    class_n[static_cast<size_t>(z % stride)] += slice_n[static_cast<size_t>(z)];
  }
  if (slices > 1) m.slice = std::sqrt(std::max(0.0, ss2 / slices - (ss / slices) * (ss / slices)));
  double lo = 1e300, hi = -1e300;
  for (int r = 0; r < stride; ++r) {
    if (class_n[static_cast<size_t>(r)] == 0) continue;
    const double cm = class_sum[static_cast<size_t>(r)] / class_n[static_cast<size_t>(r)];
    lo = std::min(lo, cm);
    hi = std::max(hi, cm);
  }
  m.period = hi >= lo ? hi - lo : 0;
  return m;
}

void PrintMetrics(const std::string& label, const Metrics& m) {
  std::printf("%-34s rms %.3e noise %.3e column %.3f rz1 %+.3f rz2 %+.3f rx1 %+.3f slice %.2e "
              "period %.2e\n",
              label.c_str(), m.rms_error, m.noise, m.column, m.rz1, m.rz2, m.rx1, m.slice,
              m.period);
}

std::vector<std::pair<double, double>> ParsePriors(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) continue;
    out.push_back({std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1))});
  }
  return out;
}


int Main(int argc, char** argv) {
  CLI::App app{"icd-noise-study: ICD against FDK, noise and z-stripes, on the CPU"};
  std::vector<int64_t> size{128, 128, 32};
  double dz = 0.3, photons = 2e4, phantom_fill = 0.9;
  int views = 391, supersampling = 1, columns_per_step = IcdOptions::kDefaultColumnsPerStep;
  int64_t iterations = 8;
  std::string priors_text = "1e-3:0.1", png_path;
  bool per_iteration_order = false, restart = false;
  app.add_option("--size", size, "volume nx,ny,nz")
      ->delimiter(',')
      ->expected(3)
      ->capture_default_str();
  app.add_option("--dz", dz, "slice thickness, mm")->capture_default_str();
  app.add_option("--views", views, "views over 360 degrees")->capture_default_str();
  app.add_option("--photons", photons, "photons per unattenuated pixel")->capture_default_str();
  app.add_option("--phantom-fill", phantom_fill,
                 "the head's radius over the volume's half width")->capture_default_str();
  app.add_option("--supersampling", supersampling, "data rays per pixel side")
      ->capture_default_str();
  app.add_option("--iterations", iterations, "ICD iterations per prior")->capture_default_str();
  app.add_option("--priors", priors_text, "sigma:c pairs, comma-separated")->capture_default_str();
  app.add_option("--columns-per-step", columns_per_step, "ICD columns per step")
      ->capture_default_str();
  app.add_flag("--per-iteration-order", per_iteration_order,
               "a new column order every iteration");
  app.add_flag("--restart", restart,
               "one run of one iteration per iteration from the last volume (the residual "
               "computed afresh), every run the same order: one order for all iterations, as "
               "ICD ran before it drew a new order every iteration");
  app.add_option("--png", png_path, "central slices of phantom, FDK and each prior's ICD");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  const double dx = 0.415;
  const core::VolumeGeometry volume =
      core::VolumeGeometry::Create({size[0], size[1], size[2]}, {dx, dx, dz}, {}).value();
  const double source_axis = 647.7, source_detector = 1147.7;
  const double half_diagonal = 0.5 * dx * std::hypot(size[0], size[1]);
  const double magnification_max = source_detector / (source_axis - half_diagonal);
  core::FanConeOptions cone;
  cone.detector.columns =
      static_cast<int64_t>(std::ceil(2 * half_diagonal * magnification_max / 0.384)) + 8;
  cone.detector.rows =
      static_cast<int64_t>(std::ceil(size[2] * dz * magnification_max / 0.755)) + 4;
  cone.detector.row_spacing_mm = 0.755;
  cone.detector.column_spacing_mm = 0.384;
  cone.source_origin_mm = source_axis;
  cone.origin_detector_mm = source_detector - source_axis;
  cone.angles_rad = core::UniformAnglesRad(views, 0, 2 * kPi);
  const core::VectorGeometry geometry = core::MakeCircularCone(cone).value();
  const double radius = phantom_fill * 0.5 * dx * std::min(size[0], size[1]);
  std::vector<core::Ellipsoid> ellipsoids =
      core::EllipsoidPhantom::SheppLogan3D(radius).ellipsoids();
  for (core::Ellipsoid& e : ellipsoids) e.density *= 0.02;
  const core::EllipsoidPhantom phantom(std::move(ellipsoids));

  // Data of the slab's part of the phantom, pixel-centre rays (or supersampled), Poisson.
  auto t0 = std::chrono::steady_clock::now();
  const double z_lo = volume.z_mm(0) - 0.5 * dz, z_hi = volume.z_mm(size[2] - 1) + 0.5 * dz;
  const Array3D exact = phantom.Project(geometry, supersampling, z_lo, z_hi);
  Array3D line_integrals(exact.dims()), weights(exact.dims());
  const int64_t view_pixels = exact.dims().d1 * exact.dims().d2;
  for (int64_t view = 0; view < exact.dims().d0; ++view) {
    std::mt19937_64 random(20261128u + static_cast<uint64_t>(view) * 0x9E3779B97F4A7C15ull);
    for (int64_t i = view * view_pixels; i < (view + 1) * view_pixels; ++i) {
      const double mean = photons * std::exp(-static_cast<double>(exact.data()[i]));
      const double counts =
          std::max(1.0, static_cast<double>(std::poisson_distribution<int64_t>(mean)(random)));
      line_integrals.data()[i] = static_cast<float>(-std::log(counts / photons));
      weights.data()[i] = static_cast<float>(counts);
    }
  }
  const Array3D truth = phantom.Rasterize(volume, 2);
  const std::vector<uint8_t> mask = UniformMask(truth);
  int64_t masked = 0;
  for (uint8_t m : mask) masked += m;
  core::CpuBackend cpu;
  auto fdk = core::Fdk(geometry, volume, line_integrals, core::FdkOptions{}, cpu, {});
  if (!fdk.ok()) {
    std::fprintf(stderr, "icd-noise-study: FDK: %s\n", std::string(fdk.status().message()).c_str());
    return 1;
  }
  for (int64_t i = 0; i < fdk->size(); ++i) fdk->data()[i] = std::max(fdk->data()[i], 0.0f);
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
  const int stride = groups.Stride(size[0] / 2, size[1] / 2);
  std::printf("volume %lld x %lld x %lld of %.3f x %.3f x %.3f mm, %d views of %lld x %lld "
              "pixels, head radius %.1f mm, %.0f photons, %d^2 rays per pixel; uniform region "
              "%lld voxels; stride %d (K mean %.1f); data and FDK %.1f s\n",
              static_cast<long long>(size[0]), static_cast<long long>(size[1]),
              static_cast<long long>(size[2]), dx, dx, dz, views,
              static_cast<long long>(cone.detector.rows),
              static_cast<long long>(cone.detector.columns), radius, photons, supersampling,
              static_cast<long long>(masked), stride, groups.mean_group_size(), Seconds(t0));
  PrintMetrics("FDK (Ram-Lak, clamped at 0)", Measure(*fdk, truth, mask, stride));

  std::vector<Array3D> last;
  for (const auto& [sigma, c] : ParsePriors(priors_text)) {
    IcdOptions options;
    options.prior = DefaultQggmrfPrior(volume);
    options.prior.sigma = sigma;
    options.prior.c = c;
    options.columns_per_step = columns_per_step;
    const bool one_run_per_iteration = per_iteration_order || restart;
    options.iterations = one_run_per_iteration ? 1 : iterations;
    Array3D current = fdk->Clone();
    t0 = std::chrono::steady_clock::now();
    auto observe = [&](int64_t iteration, const Array3D& x) {
      PrintMetrics(absl::StrCat("ICD sigma ", sigma, " c ", c, " it ", iteration),
                   Measure(x, truth, mask, stride));
    };
    absl::StatusOr<IcdResult> result;
    if (!one_run_per_iteration) {
      result = ReconstructIcdCpu(sf, line_integrals, weights, &current, options, {}, observe);
    } else {
      for (int64_t it = 1; it <= iterations; ++it) {
        options.column_order_seed = per_iteration_order ? static_cast<uint64_t>(it) : 1;
        result = ReconstructIcdCpu(sf, line_integrals, weights, &current, options, {},
                                   [&](int64_t, const Array3D& x) { observe(it, x); });
        if (!result.ok()) break;
        current = result->volume.Clone();
      }
    }
    if (!result.ok()) {
      std::fprintf(stderr, "icd-noise-study: ICD: %s\n",
                   std::string(result.status().message()).c_str());
      return 1;
    }
    const IcdIterationRecord& r = result->iterations.back();
    std::printf("  cost %.6e (data %.6e prior %.6e), %.1f s per iteration, %lld steps\n", r.cost,
                r.data_term, r.prior_term, Seconds(t0) / static_cast<double>(iterations),
                static_cast<long long>(result->steps));
    last.push_back(std::move(result->volume));
  }
  if (!png_path.empty()) {
    std::vector<const Array3D*> volumes{&truth, &*fdk};
    for (const Array3D& v : last) volumes.push_back(&v);
    const core::DisplayWindow brain{0.002, 0.007};  // the phantom's brain contrasts, per mm
    if (absl::Status written = WriteCentralSlicesPng(png_path, volumes, volume, brain);
        !written.ok()) {
      std::fprintf(stderr, "icd-noise-study: %s\n", std::string(written.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) { return tomo::bench::Main(argc, argv); }
