// icd-bench: PWLS/q-GGMRF reconstruction by ICD on CUDA, multi-voxel (MVU) against
// single-voxel (SVU) update, on the case of the multi-voxel-update literature: circular
// cone beam, 391 views over 360 degrees, flat detector 1024 x 386 pixels of 0.384 x 0.755 mm,
// source-detector 1147.7 mm, source-axis 647.7 mm; volume 512 x 512 x Nz of 0.415 x 0.415 x
// 0.3 mm voxels, Nz = 16 ... 512.
//
// Data: the 3D Shepp-Logan phantom (core/phantom/ellipsoid_phantom.h) of radius 95 mm with
// its densities times 0.02 /mm (water-like attenuation), its exact line integrals, and
// Poisson noise at --photons photons per unattenuated pixel (default 2e4: a low dose); the
// weights are the detected counts. The volume covers the middle Nz slices of the object;
// the data of each Nz are the projections of the phantom's part inside that slab (the rest
// cut away), so that they are consistent with the volume for every method. With
// --whole-object one projection of the whole phantom serves every Nz instead: a long
// object, whose rays outside the slab no method on the slab can explain (the iterative
// ones then pile the unexplained attenuation into the slab). Start: FDK of the same data
// (CUDA backend).
//
// For each Nz: the groups (K = mean and largest group size), the work count (voxels x views
// x mean footprint pixels) and the floor it implies, then --iterations MVU iterations with
// the cost, the RMS error against the phantom and the noise (standard deviation) in a
// uniform region after each; the same with up to --columns-per-step columns per step
// (default 3, see core/statistical/update_schedule.h); SVU timed on its first --svu-groups groups of an iteration and
// extrapolated to the whole iteration (a full 512^3 SVU iteration is about 1.3e8 group
// steps), or run in full for Nz in --svu-full (cost and error per iteration beside MVU's).
// Output: a table on stdout and --json. --kernel lists the device kernels
// (core/statistical/cuda/icd_cuda.h: v4, the default, with its switches; persistent, the
// version 3; launch-per-step) that run the MVU; the first also runs the several-columns MVU
// and SVU. Each run prints its host setup time.
//
// With --compare-nz N (one of the Nz), also SIRT (lambda 1.9, non-negative) and CGLS from
// zero on the same noisy data and volume, each at the iteration of its smallest error
// against the phantom (semi-convergence): RMS error and uniform-region noise beside FDK's
// and ICD's, and --png: the three central slices (axial, coronal, sagittal) of phantom, FDK,
// ICD, SIRT and CGLS, one row each, in one window. --json and --png are written into
// --out-dir (created).
//
//   build/bin/icd-bench --nz 16,32,64,128,256,512 --iterations 3 --out-dir results
//   build/bin/icd-bench --nz 16 --kernel v4,persistent,launch-per-step
//   build/bin/icd-bench --nz 512 --iterations 1 --mvu-columns-per-step 3
//       --columns-per-step 0 --svu-groups 0 --kernel persistent,v4,v4+grid
//       (one line: the product's schedule alone, the kernels compared)
//   build/bin/icd-bench --nz 128 --compare-nz 128 --out-dir bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/central_slices_png.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/algorithms/sirt.h"
#include "core/base/parallel_for.h"
#include "core/io/png_preview.h"
#include "core/devices/devices.h"
#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/statistical/cuda/icd_cuda.h"
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

double RmsError(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// Standard deviation over a 24 x 24 voxel square of the central slices (at most 8) inside
// the phantom's uniform brain region, left of the centre (x = -40 mm, y = 0).
double UniformRegionNoise(const Array3D& a, const core::VolumeGeometry& volume) {
  const int64_t cx = static_cast<int64_t>(std::lround((-40.0 - volume.x_mm(0)) /
                                                       volume.voxel_size_mm().x));
  const int64_t cy = volume.size().y / 2, cz = volume.size().z / 2;
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (int64_t z = std::max<int64_t>(0, cz - 4); z < std::min(volume.size().z, cz + 4); ++z) {
    for (int64_t y = cy - 12; y < cy + 12; ++y) {
      for (int64_t x = cx - 12; x < cx + 12; ++x) {
        const double v = a.at(z, y, x);
        sum += v;
        sum2 += v * v;
        ++count;
      }
    }
  }
  const double mean = sum / count;
  return std::sqrt(std::max(0.0, sum2 / count - mean * mean));
}

// Mean number of detector pixels a voxel touches in a view (sampled).
double MeanFootprintPixels(const SeparableFootprintProjector& sf, std::mt19937_64& random) {
  const core::Size3& n = sf.volume().size();
  std::uniform_int_distribution<int64_t> x(n.x / 8, n.x - 1 - n.x / 8), y(n.y / 8, n.y - 1 - n.y / 8),
      z(0, n.z - 1);
  double pixels = 0;
  constexpr int kSamples = 64;
  for (int i = 0; i < kSamples; ++i) {
    pixels += static_cast<double>(sf.VoxelFootprint(x(random), y(random), z(random)).size());
  }
  return pixels / kSamples / static_cast<double>(sf.num_views());
}

// The method's volume at the iteration of its smallest RMS error against truth.
struct BestIterate {
  std::string name;
  int64_t iteration = 0;
  double error = 0, noise = 0;
  Array3D volume;
};

absl::StatusOr<BestIterate> RunAlgebraic(const std::string& name, bool cgls, int64_t iterations,
                                         const core::VectorGeometry& geometry,
                                         const core::VolumeGeometry& volume,
                                         const Array3D& projections, const Array3D& truth,
                                         core::Backend& backend) {
  BestIterate best;
  best.name = name;
  best.error = 1e300;
  core::IterativeOptions options;
  options.iterations = iterations;
  options.observe_volume = true;
  if (!cgls) {
    options.relaxation = 1.9;
    options.lower_bound = 0;
  }
  options.on_iteration = [&](const core::IterationReport& report) {
    const double error = RmsError(*report.volume, truth);
    if (error < best.error) {
      best.error = error;
      best.iteration = report.iteration;
      best.volume = report.volume->Clone();
    }
    return absl::OkStatus();
  };
  auto result = cgls ? core::Cgls(geometry, volume, projections, options, backend, {})
                     : core::Sirt(geometry, volume, projections, options, backend, {});
  if (!result.ok()) return result.status();
  best.noise = UniformRegionNoise(best.volume, volume);
  return best;
}

// The phantom's brain contrasts, per mm.
constexpr core::DisplayWindow kBrainWindow{0.002, 0.007};

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Noisy line integrals and their weights (the detected counts) of the phantom's part with z
// in [z_min, z_max]. Counts: Poisson with mean photons exp(-line integral), drawn exactly
// below 1000 expected counts and from the normal approximation N(m, m) above (its
// skewness, 1 / sqrt(m) < 0.03, is below what the reconstructions can tell), clamped at 1.
// Each view draws from its own generator, seeded by the view, on all cores: the data do not
// depend on the thread count.
struct NoisyData {
  Array3D line_integrals, weights;
  std::string summary;
};

NoisyData MakeNoisyData(const core::EllipsoidPhantom& phantom, const core::VectorGeometry& geometry,
                        double photons, double z_min, double z_max, int supersampling) {
  const auto t0 = std::chrono::steady_clock::now();
  const Array3D exact = phantom.Project(geometry, supersampling, z_min, z_max);
  const double project_seconds = Seconds(t0);
  NoisyData data{Array3D(exact.dims()), Array3D(exact.dims()), ""};
  const int64_t view_pixels = exact.dims().d1 * exact.dims().d2;
  core::ParallelFor(exact.dims().d0, [&](int64_t v0, int64_t v1) {
    for (int64_t view = v0; view < v1; ++view) {
      std::mt19937_64 random(20261125u + static_cast<uint64_t>(view) * 0x9E3779B97F4A7C15ull);
      std::normal_distribution<double> normal;
      for (int64_t i = view * view_pixels; i < (view + 1) * view_pixels; ++i) {
        const double mean = photons * std::exp(-static_cast<double>(exact.data()[i]));
        double counts;
        if (mean < 1000) {
          counts = static_cast<double>(std::poisson_distribution<int64_t>(mean)(random));
        } else {
          counts = std::round(mean + std::sqrt(mean) * normal(random));
        }
        counts = std::max(1.0, counts);
        data.line_integrals.data()[i] = static_cast<float>(-std::log(counts / photons));
        data.weights.data()[i] = static_cast<float>(counts);
      }
    }
  });
  data.summary = absl::StrFormat(
      "%lld views of %lld x %lld, z in [%g, %g] mm, exact projection (%d^2 rays per pixel) "
      "%.1f s, Poisson noise (%.0f photons) %.1f s, on %d threads",
      static_cast<long long>(exact.dims().d0), static_cast<long long>(exact.dims().d1),
      static_cast<long long>(exact.dims().d2), z_min, z_max, supersampling, project_seconds,
      photons,
      Seconds(t0) - project_seconds, core::DefaultThreadCount());
  return data;
}

// A --kernel item: the kernel and, for v4, its switches.
struct KernelChoice {
  IcdKernel kernel = IcdKernel::kPersistent;
  bool v4_flags = true, v4_prefetch = true, v4_l1_prefetch = false, v4_poll_sleep = false;
  int v4_voxels_per_thread = 1, v4_threads = 0;
  int view_group_shift = IcdCudaTuning{}.partial_view_group_shift;
  void ApplyTo(IcdCudaTuning& tuning) const {
    tuning.kernel = kernel;
    tuning.v4_flags = v4_flags;
    tuning.v4_prefetch = v4_prefetch;
    tuning.v4_l1_prefetch = v4_l1_prefetch;
    tuning.v4_voxels_per_thread = v4_voxels_per_thread;
    tuning.v4_poll_sleep = v4_poll_sleep;
    tuning.v4_threads = v4_threads;
    tuning.partial_view_group_shift = view_group_shift;
  }
};

// persistent, launch-per-step, or v4 with '+'-joined switches: grid (grid barriers instead
// of flags), noprefetch, l1 (L1 prefetch), sleep / spin (flags polled with short sleeps, or
// spinning: the default), g1 ... g16 (the theta partials of that many views of a voxel side by
// side), v1 / v2 (voxels per thread; 1 the default), t128 / t256 / t288 /
// t320 (threads per block), e.g. v4+grid+v2+t256. Plain v4 is IcdCudaTuning's default.
absl::StatusOr<KernelChoice> ParseKernel(const std::string& name) {
  KernelChoice choice;
  if (name == "persistent") return choice;
  if (name == "launch-per-step") {
    choice.kernel = IcdKernel::kLaunchPerStep;
    return choice;
  }
  std::stringstream stream(name);
  std::string part;
  std::getline(stream, part, '+');
  if (part == "v4") {
    choice.kernel = IcdKernel::kPersistentV4;
    bool known = true;
    while (known && std::getline(stream, part, '+')) {
      if (part == "grid") {
        choice.v4_flags = false;
      } else if (part == "noprefetch") {
        choice.v4_prefetch = false;
      } else if (part == "l1") {
        choice.v4_l1_prefetch = true;
      } else if (part == "spin" || part == "sleep") {
        choice.v4_poll_sleep = part == "sleep";
      } else if (part == "g1" || part == "g2" || part == "g4" || part == "g8" || part == "g16") {
        const int together = std::stoi(part.substr(1));
        choice.view_group_shift = 0;
        while ((1 << choice.view_group_shift) < together) ++choice.view_group_shift;
      } else if (part == "v1" || part == "v2") {
        choice.v4_voxels_per_thread = part == "v1" ? 1 : 2;
      } else if (part == "t128" || part == "t256" || part == "t288" || part == "t320") {
        choice.v4_threads = std::stoi(part.substr(1));
      } else {
        known = false;
      }
    }
    if (known) return choice;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--kernel: '", name, "' is not one of persistent, launch-per-step, v4[+grid][+noprefetch]"
      "[+l1][+sleep|+spin][+g1|+g2|+g4|+g8|+g16][+v1|+v2][+t128|+t256|+t288|+t320]"));
}

// One MVU run (one column per step) with a kernel.
struct KernelRun {
  std::string kernel;
  double setup_seconds = 0;
  std::vector<double> seconds, cost;
};

struct Row {
  int64_t nz = 0;
  double mean_k = 0;
  int64_t max_k = 0, groups = 0;
  double footprint_pixels = 0, pixel_visits = 0;
  std::vector<double> mvu_seconds, mvu_cost, mvu_error, mvu_noise, mvu_data, mvu_prior;
  double mvu_setup_seconds = 0, svu_setup_seconds = 0, host_seconds = 0;
  std::vector<KernelRun> other_kernels;  // MVU with the --kernel list's other kernels
  double fdk_error = 0, fdk_noise = 0, initial_cost = 0;
  double svu_seconds = 0;  // per iteration (extrapolated unless svu_full)
  bool svu_full = false;
  std::vector<double> svu_cost, svu_error;
  // MVU with two columns per step (UpdateSchedule), when run.
  int64_t paired_steps = 0, paired_columns = 0;
  std::vector<double> paired_seconds, paired_cost, paired_error;
};

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) out.push_back(std::stoll(item));
  }
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"icd-bench: ICD multi-voxel against single-voxel update (issue 20)"};
  std::string nz_text = "16,32,64,128,256,512", svu_full_text = "", json_path = "icd.json";
  int64_t iterations = 3, svu_groups = 200000;
  double photons = 2e4, sigma = 3e-4, c = 1.0;
  int groups_per_graph = 256;
  int columns_per_step = 3;
  int64_t compare_nz = 0, sirt_iterations = 60, cgls_iterations = 20;
  std::string png_path = "icd_compare.png", out_dir = ".", kernel_text = "v4";
  int steps_per_launch = 2048;
  app.add_option("--out-dir", out_dir, "directory for --json and --png (created)")
      ->capture_default_str();
  app.add_option("--kernel", kernel_text,
                 "device kernels for MVU, comma-separated (persistent, launch-per-step, "
                 "v4[+grid][+noprefetch][+l1][+sleep|+spin][+g1|+g2|+g4|+g8|+g16][+v1|+v2][+t128|+t256|+t288|+t320]); "
                 "the "
                 "first also runs the several-columns MVU and SVU")
      ->capture_default_str();
  app.add_option("--steps-per-launch", steps_per_launch, "persistent kernel: steps per launch")
      ->capture_default_str();
  app.add_option("--columns-per-step", columns_per_step,
                 "also MVU with this many columns per step (2..4; 0 or 1: not)")
      ->capture_default_str();
  int mvu_columns_per_step = 1;
  app.add_option("--mvu-columns-per-step", mvu_columns_per_step,
                 "columns per step of the MVU runs of every --kernel (1: the literature's; 3 with "
                 "--columns-per-step 0 times each kernel on the product's schedule alone)")
      ->capture_default_str();
  app.add_option("--compare-nz", compare_nz, "Nz for the FDK/ICD/SIRT/CGLS comparison (0: none)");
  app.add_option("--sirt-iterations", sirt_iterations, "SIRT iterations at most")->capture_default_str();
  app.add_option("--cgls-iterations", cgls_iterations, "CGLS iterations at most")->capture_default_str();
  app.add_option("--png", png_path, "comparison slices, file name in --out-dir")
      ->capture_default_str();
  app.add_option("--nz", nz_text, "slice counts, comma-separated")->capture_default_str();
  app.add_option("--iterations", iterations, "MVU iterations per Nz")->capture_default_str();
  app.add_option("--svu-groups", svu_groups, "SVU groups timed per Nz (0: no SVU)")
      ->capture_default_str();
  std::string prior_sweep_text, blocks_sweep_text;
  int64_t sweep_iterations = 5;
  app.add_option("--prior-sweep", prior_sweep_text,
                 "sigma:c pairs, comma-separated: MVU with each prior at the comparison's Nz "
                 "(else the first), --sweep-iterations each; the comparison shows the one of "
                 "smallest error");
  app.add_option("--sweep-iterations", sweep_iterations, "iterations of each prior sweep run")
      ->capture_default_str();
  app.add_option("--blocks-sweep", blocks_sweep_text,
                 "persistent grid sizes, comma-separated: one timed MVU iteration each");
  int ray_supersampling = 1;
  app.add_option("--ray-supersampling", ray_supersampling,
                 "exact line integrals per pixel side, averaged (1: the pixel centre's; the "
                 "projector models integrate over the pixel, so 2 or 3 is closer to them)")
      ->capture_default_str();
  bool whole_object = false;
  app.add_flag("--whole-object", whole_object,
               "project the whole phantom (a long object: the volume's slab then explains only "
               "part of the data) instead of the slab's part for each Nz");
  int persistent_blocks = 0;
  app.add_option("--persistent-blocks", persistent_blocks,
                 "persistent kernel: blocks of the grid (0: one per view, as many as fit)")
      ->capture_default_str();
  app.add_option("--svu-full", svu_full_text, "Nz for which SVU runs full iterations");
  app.add_option("--photons", photons, "photons per unattenuated pixel")->capture_default_str();
  app.add_option("--sigma", sigma, "prior sigma, per mm")->capture_default_str();
  app.add_option("--c", c, "prior c")->capture_default_str();
  app.add_option("--groups-per-graph", groups_per_graph, "0: plain launches")->capture_default_str();
  app.add_option("--json", json_path, "results as JSON, file name in --out-dir")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::vector<std::pair<double, double>> prior_sweep;
  {
    std::stringstream stream(prior_sweep_text);
    std::string item;
    while (std::getline(stream, item, ',')) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "icd-bench: --prior-sweep: '%s' is not sigma:c\n", item.c_str());
        return 1;
      }
      prior_sweep.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
    }
  }
  const std::vector<int64_t> blocks_sweep = ParseList(blocks_sweep_text);
  std::vector<KernelChoice> kernels;
  std::vector<std::string> kernel_names;
  {
    std::stringstream stream(kernel_text);
    std::string item;
    while (std::getline(stream, item, ',')) {
      auto kernel = ParseKernel(item);
      if (!kernel.ok()) {
        std::fprintf(stderr, "icd-bench: %s\n", std::string(kernel.status().message()).c_str());
        return 1;
      }
      kernels.push_back(*kernel);
      kernel_names.push_back(item);
    }
    if (kernels.empty()) {
      std::fprintf(stderr, "icd-bench: --kernel: none given\n");
      return 1;
    }
  }
  std::error_code made;
  std::filesystem::create_directories(out_dir, made);
  if (made) {
    std::fprintf(stderr, "icd-bench: --out-dir %s: %s\n", out_dir.c_str(), made.message().c_str());
    return 1;
  }
  json_path = (std::filesystem::path(out_dir) / json_path).string();
  png_path = (std::filesystem::path(out_dir) / png_path).string();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress visible when piped

  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty()) {
    std::fprintf(stderr, "icd-bench: no CUDA device\n");
    return 1;
  }
  auto backend = core::MakeBackend(devices.front());
  if (!backend.ok()) {
    std::fprintf(stderr, "icd-bench: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  std::printf("device %s (%s)\n", devices.front().id.c_str(), devices.front().name.c_str());

  core::FanConeOptions cone;
  cone.detector = {386, 1024, 0.755, 0.384, 0, 0};
  cone.source_origin_mm = 647.7;
  cone.origin_detector_mm = 1147.7 - 647.7;
  cone.angles_rad = core::UniformAnglesRad(391, 0, 2 * kPi);
  const core::VectorGeometry geometry = core::MakeCircularCone(cone).value();
  std::vector<core::Ellipsoid> ellipsoids = core::EllipsoidPhantom::SheppLogan3D(95).ellipsoids();
  for (core::Ellipsoid& e : ellipsoids) e.density *= 0.02;
  const core::EllipsoidPhantom phantom(std::move(ellipsoids));

  std::mt19937_64 random(20261125);
  auto t0 = std::chrono::steady_clock::now();
  // Whole object: one data set for every Nz.
  NoisyData whole;
  if (whole_object) {
    whole = MakeNoisyData(phantom, geometry, photons, -kInfinity, kInfinity, ray_supersampling);
    std::printf("data (whole object): %s\n", whole.summary.c_str());
  }

  const std::vector<int64_t> svu_full = ParseList(svu_full_text);
  std::vector<Row> rows;
  for (int64_t nz : ParseList(nz_text)) {
    Row row;
    row.nz = nz;
    row.svu_full = std::find(svu_full.begin(), svu_full.end(), nz) != svu_full.end();
    const core::VolumeGeometry volume =
        core::VolumeGeometry::Create({512, 512, nz}, {0.415, 0.415, 0.3}, {}).value();
    const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
    // The slab's data: the phantom between the volume's bottom and top faces.
    NoisyData slab;
    if (!whole_object) {
      slab = MakeNoisyData(phantom, geometry, photons,
                           volume.z_mm(0) - 0.5 * volume.voxel_size_mm().z,
                           volume.z_mm(static_cast<double>(nz - 1)) + 0.5 * volume.voxel_size_mm().z,
                           ray_supersampling);
      std::printf("\ndata (the slab's part of the phantom): %s\n", slab.summary.c_str());
    }
    const Array3D& line_integrals = whole_object ? whole.line_integrals : slab.line_integrals;
    const Array3D& weights = whole_object ? whole.weights : slab.weights;
    t0 = std::chrono::steady_clock::now();
    const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
    row.mean_k = groups.mean_group_size();
    row.max_k = groups.max_group_size();
    row.groups = groups.total_groups();
    row.footprint_pixels = MeanFootprintPixels(sf, random);
    row.pixel_visits = static_cast<double>(volume.voxel_count()) * 391 * row.footprint_pixels;
    std::printf("\nNz %lld: groups %lld, K mean %.1f largest %lld (found in %.1f s); "
                "mean footprint %.2f pixels per voxel and view: %.3g pixel visits per "
                "iteration in each of the back projection and the forward update\n",
                static_cast<long long>(nz), static_cast<long long>(row.groups), row.mean_k,
                static_cast<long long>(row.max_k), Seconds(t0), row.footprint_pixels,
                row.pixel_visits);
    const auto host_start = std::chrono::steady_clock::now();
    const Array3D truth = phantom.Rasterize(volume, 1);
    auto fdk = core::Fdk(geometry, volume, line_integrals, core::FdkOptions{}, **backend, {});
    if (!fdk.ok()) {
      std::fprintf(stderr, "icd-bench: FDK: %s\n", std::string(fdk.status().message()).c_str());
      return 1;
    }
    row.fdk_error = RmsError(*fdk, truth);
    row.fdk_noise = UniformRegionNoise(*fdk, volume);
    row.host_seconds = Seconds(host_start);
    std::printf("  phantom rasterised and FDK in %.1f s\n", row.host_seconds);

    IcdOptions options;
    options.iterations = iterations;
    options.prior = DefaultQggmrfPrior(volume);
    options.prior.sigma = sigma;
    options.prior.c = c;
    options.columns_per_step = mvu_columns_per_step;  // 1: the literature's MVU
    IcdCudaTuning tuning;
    kernels.front().ApplyTo(tuning);
    tuning.steps_per_launch = steps_per_launch;
    tuning.persistent_blocks = persistent_blocks;
    tuning.groups_per_graph = groups_per_graph;
    tuning.on_iteration_volume = [&](int64_t, const Array3D& x) {
      row.mvu_error.push_back(RmsError(x, truth));
      row.mvu_noise.push_back(UniformRegionNoise(x, volume));
    };
    auto mvu = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, options,
                                  devices.front().index, tuning, {});
    if (!mvu.ok()) {
      std::fprintf(stderr, "icd-bench: MVU: %s\n", std::string(mvu.status().message()).c_str());
      return 1;
    }
    row.initial_cost = mvu->initial_cost;
    row.mvu_setup_seconds = mvu->setup_seconds;
    for (const IcdIterationRecord& r : mvu->iterations) {
      row.mvu_seconds.push_back(r.seconds);
      row.mvu_cost.push_back(r.cost);
      row.mvu_data.push_back(r.data_term);
      row.mvu_prior.push_back(r.prior_term);
    }
    std::printf("  MVU (%s, %d columns per step): setup %.1f s, first iteration %.3f s (%lld "
                "steps, %.2f us per step), cost %.6e\n",
                kernel_names[0].c_str(), mvu_columns_per_step, mvu->setup_seconds,
                row.mvu_seconds.front(), static_cast<long long>(mvu->steps),
                1e6 * row.mvu_seconds.front() / static_cast<double>(std::max<int64_t>(1, mvu->steps)),
                row.mvu_cost.front());
    for (size_t k = 1; k < kernels.size(); ++k) {
      IcdCudaTuning other = tuning;
      kernels[k].ApplyTo(other);
      other.on_iteration_volume = nullptr;
      auto result = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, options,
                                       devices.front().index, other, {});
      if (!result.ok()) {
        std::fprintf(stderr, "icd-bench: MVU (%s): %s\n", kernel_names[k].c_str(),
                     std::string(result.status().message()).c_str());
        return 1;
      }
      KernelRun run;
      run.kernel = kernel_names[k];
      run.setup_seconds = result->setup_seconds;
      for (const IcdIterationRecord& r : result->iterations) {
        run.seconds.push_back(r.seconds);
        run.cost.push_back(r.cost);
      }
      std::printf("  MVU (%s): setup %.1f s, %.3f s/iteration (%.2f us per step), last cost "
                  "%.6e (%s: %.6e)\n",
                  run.kernel.c_str(), run.setup_seconds, Mean(run.seconds),
                  1e6 * Mean(run.seconds) / static_cast<double>(std::max<int64_t>(1, result->steps)),
                  run.cost.back(),
                  kernel_names[0].c_str(), row.mvu_cost.back());
      row.other_kernels.push_back(std::move(run));
    }

    if (columns_per_step > 1) {
      IcdOptions paired_options = options;
      paired_options.columns_per_step = columns_per_step;
      IcdCudaTuning paired_tuning = tuning;
      paired_tuning.on_iteration_volume = nullptr;
      paired_tuning.on_iteration_volume = [&](int64_t, const Array3D& x) {
        row.paired_error.push_back(RmsError(x, truth));
      };
      auto result = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, paired_options,
                                       devices.front().index, paired_tuning, {});
      if (!result.ok()) {
        std::fprintf(stderr, "icd-bench: MVU, several columns per step: %s\n",
                     std::string(result.status().message()).c_str());
        return 1;
      }
      row.paired_steps = result->steps;
      row.paired_columns = result->paired_columns;
      for (const IcdIterationRecord& r : result->iterations) {
        row.paired_seconds.push_back(r.seconds);
        row.paired_cost.push_back(r.cost);
      }
    }

    options.grouping = GroupingMode::kSingleVoxel;
    const bool run_svu = row.svu_full || svu_groups > 0;
    IcdCudaTuning svu_tuning = tuning;
    svu_tuning.on_iteration_volume = nullptr;
    if (row.svu_full) {
      svu_tuning.on_iteration_volume = [&](int64_t, const Array3D& x) {
        row.svu_error.push_back(RmsError(x, truth));
      };
    } else {
      options.iterations = 1;
      svu_tuning.step_limit = svu_groups;
    }
    absl::StatusOr<IcdResult> svu = IcdResult{};
    if (run_svu) {
      svu = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, options,
                               devices.front().index, svu_tuning, {});
    }
    if (!svu.ok()) {
      std::fprintf(stderr, "icd-bench: SVU: %s\n", std::string(svu.status().message()).c_str());
      return 1;
    }
    row.svu_setup_seconds = svu->setup_seconds;
    if (!run_svu) {
      row.svu_seconds = 0;
    } else if (row.svu_full) {
      double total = 0;
      for (const IcdIterationRecord& r : svu->iterations) {
        total += r.seconds;
        row.svu_cost.push_back(r.cost);
      }
      row.svu_seconds = total / static_cast<double>(svu->iterations.size());
    } else {
      const double timed = static_cast<double>(std::min<int64_t>(svu_groups, svu->steps));
      row.svu_seconds = svu->iterations[0].seconds * static_cast<double>(svu->steps) / timed;
    }
    std::printf("  FDK: RMS error %.4e /mm, noise %.4e /mm; ICD initial cost %.6e\n",
                row.fdk_error, row.fdk_noise, row.initial_cost);
    for (size_t k = 0; k < row.mvu_cost.size(); ++k) {
      std::printf("  MVU iteration %zu: %.3f s, cost %.6e (data %.4e + prior %.4e), RMS error "
                  "%.4e, noise %.4e",
                  k + 1, row.mvu_seconds[k], row.mvu_cost[k], row.mvu_data[k], row.mvu_prior[k],
                  row.mvu_error[k], row.mvu_noise[k]);
      if (k < row.paired_cost.size()) {
        std::printf(" | %d columns/step: %.3f s, cost %.6e, RMS error %.4e", columns_per_step,
                    row.paired_seconds[k],
                    row.paired_cost[k], row.paired_error[k]);
      }
      if (k < row.svu_cost.size()) {
        std::printf(" | SVU cost %.6e, RMS error %.4e", row.svu_cost[k], row.svu_error[k]);
      }
      std::printf("\n");
    }
    double mvu_mean = 0;
    for (double s : row.mvu_seconds) mvu_mean += s;
    mvu_mean /= static_cast<double>(row.mvu_seconds.size());
    std::printf("  s/iteration: MVU %.3f, SVU %.3f%s, speedup %.1f\n", mvu_mean, row.svu_seconds,
                row.svu_full ? "" : " (extrapolated)", row.svu_seconds / mvu_mean);
    if (!row.paired_seconds.empty()) {
      std::printf("  MVU with up to %d columns per step: %lld steps (%lld of 262144 columns "
                  "with partners), %.3f s/iteration, speedup over SVU %.1f\n",
                  columns_per_step, static_cast<long long>(row.paired_steps),
                  static_cast<long long>(row.paired_columns), Mean(row.paired_seconds),
                  row.svu_seconds / Mean(row.paired_seconds));
    }
    // The prior sweep and the grid-size sweep run at the comparison's Nz (else the first).
    const bool sweep_here = compare_nz > 0 ? nz == compare_nz : rows.empty();
    Array3D best_sweep_volume;
    std::string best_sweep_name;
    if (sweep_here && !prior_sweep.empty()) {
      double best_error = 1e300;
      for (const auto& [sweep_sigma, sweep_c] : prior_sweep) {
        IcdOptions sweep_options = options;
        sweep_options.grouping = GroupingMode::kMultiVoxel;
        sweep_options.iterations = sweep_iterations;
        sweep_options.columns_per_step = std::max(1, columns_per_step);
        sweep_options.prior.sigma = sweep_sigma;
        sweep_options.prior.c = sweep_c;
        IcdCudaTuning sweep_tuning = tuning;
        std::vector<double> errors, noises;
        Array3D last;
        sweep_tuning.on_iteration_volume = [&](int64_t, const Array3D& x) {
          errors.push_back(RmsError(x, truth));
          noises.push_back(UniformRegionNoise(x, volume));
          last = x.Clone();
        };
        auto result = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, sweep_options,
                                         devices.front().index, sweep_tuning, {});
        if (!result.ok()) {
          std::fprintf(stderr, "icd-bench: prior sweep: %s\n",
                       std::string(result.status().message()).c_str());
          return 1;
        }
        std::printf("  prior sigma %.3g /mm, c %.3g (c sigma %.3g /mm), %d columns per step:\n",
                    sweep_sigma, sweep_c, sweep_c * sweep_sigma, sweep_options.columns_per_step);
        for (size_t k = 0; k < result->iterations.size(); ++k) {
          const IcdIterationRecord& r = result->iterations[k];
          std::printf("    iteration %zu: %.3f s, cost %.6e (data %.4e + prior %.4e), RMS error "
                      "%.4e, noise %.4e\n",
                      k + 1, r.seconds, r.cost, r.data_term, r.prior_term, errors[k], noises[k]);
        }
        if (errors.back() < best_error) {
          best_error = errors.back();
          best_sweep_volume = std::move(last);
          best_sweep_name = absl::StrFormat("sigma %.3g c %.3g", sweep_sigma, sweep_c);
          row.mvu_error.back() = errors.back();
          row.mvu_noise.back() = noises.back();
        }
      }
      std::printf("  prior sweep: smallest RMS error with %s (the comparison shows it)\n",
                  best_sweep_name.c_str());
    }
    if (sweep_here && !blocks_sweep.empty()) {
      for (int64_t blocks : blocks_sweep) {
        IcdOptions timing_options = options;
        timing_options.grouping = GroupingMode::kMultiVoxel;
        timing_options.iterations = 1;
        timing_options.columns_per_step = std::max(1, columns_per_step);
        IcdCudaTuning timing_tuning = tuning;
        timing_tuning.on_iteration_volume = nullptr;
        timing_tuning.persistent_blocks = static_cast<int>(blocks);
        auto result = ReconstructIcdCuda(sf, line_integrals, weights, &*fdk, timing_options,
                                         devices.front().index, timing_tuning, {});
        if (!result.ok()) {
          std::fprintf(stderr, "icd-bench: grid sweep: %s\n",
                       std::string(result.status().message()).c_str());
          return 1;
        }
        std::printf("  persistent grid of at most %lld blocks, %d columns per step: %.3f s per "
                    "iteration (%.2f us per step)\n",
                    static_cast<long long>(blocks), timing_options.columns_per_step,
                    result->iterations[0].seconds,
                    1e6 * result->iterations[0].seconds / static_cast<double>(result->steps));
      }
    }
    if (nz == compare_nz) {
      std::vector<BestIterate> algebraic;
      for (bool cgls : {false, true}) {
        auto best = RunAlgebraic(cgls ? "CGLS" : "SIRT", cgls, cgls ? cgls_iterations : sirt_iterations,
                                 geometry, volume, line_integrals, truth, **backend);
        if (!best.ok()) {
          std::fprintf(stderr, "icd-bench: %s\n", std::string(best.status().message()).c_str());
          return 1;
        }
        algebraic.push_back(std::move(*best));
      }
      std::printf("  comparison at Nz %lld (RMS error /mm, noise /mm in the uniform region):\n",
                  static_cast<long long>(nz));
      std::printf("    FDK            %.4e  %.4e\n", row.fdk_error, row.fdk_noise);
      std::printf("    ICD (%lld it%s%s)   %.4e  %.4e\n",
                  static_cast<long long>(best_sweep_name.empty() ? iterations : sweep_iterations),
                  best_sweep_name.empty() ? "" : ", ", best_sweep_name.c_str(),
                  row.mvu_error.back(), row.mvu_noise.back());
      for (const BestIterate& b : algebraic) {
        std::printf("    %s (best %lld) %.4e  %.4e\n", b.name.c_str(),
                    static_cast<long long>(b.iteration), b.error, b.noise);
      }
      const absl::Status written = WriteCentralSlicesPng(
          png_path,
          {&truth, &*fdk, best_sweep_name.empty() ? &mvu->volume : &best_sweep_volume,
           &algebraic[0].volume, &algebraic[1].volume},
          volume, kBrainWindow);
      std::printf("    slices (phantom, FDK, ICD, SIRT, CGLS): %s %s\n", png_path.c_str(),
                  written.ok() ? "" : std::string(written.message()).c_str());
    }
    rows.push_back(std::move(row));
  }

  std::printf("\n%6s %8s %6s %10s %12s %12s %9s %12s %9s %14s\n", "Nz", "K mean", "K max",
              "groups", "MVU s/it", "SVU s/it", "speedup", "MVU-m s/it", "speedup", "visits/it");
  std::ofstream json(json_path);
  json << "{\"device\": \"" << devices.front().name << "\", \"photons\": " << photons
       << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    double mvu_mean = 0;
    for (double s : r.mvu_seconds) mvu_mean += s;
    mvu_mean /= static_cast<double>(r.mvu_seconds.size());
    const double pairs_mean = Mean(r.paired_seconds);
    std::printf("%6lld %8.1f %6lld %10lld %12.3f %12.3f %9.1f %12.3f %9.1f %14.3g\n",
                static_cast<long long>(r.nz), r.mean_k, static_cast<long long>(r.max_k),
                static_cast<long long>(r.groups), mvu_mean, r.svu_seconds, r.svu_seconds / mvu_mean,
                pairs_mean, pairs_mean > 0 ? r.svu_seconds / pairs_mean : 0.0, r.pixel_visits);
    auto list = [](const std::vector<double>& v) {
      std::string out = "[";
      for (size_t k = 0; k < v.size(); ++k) out += absl::StrCat(k ? ", " : "", v[k]);
      return out + "]";
    };
    json << (i ? ", " : "") << "{\"nz\": " << r.nz << ", \"k_mean\": " << r.mean_k
         << ", \"k_max\": " << r.max_k << ", \"groups\": " << r.groups
         << ", \"footprint_pixels\": " << r.footprint_pixels
         << ", \"mvu_seconds\": " << list(r.mvu_seconds) << ", \"mvu_cost\": " << list(r.mvu_cost)
         << ", \"mvu_data_term\": " << list(r.mvu_data)
         << ", \"mvu_prior_term\": " << list(r.mvu_prior)
         << ", \"mvu_rms_error\": " << list(r.mvu_error) << ", \"mvu_noise\": " << list(r.mvu_noise)
         << ", \"initial_cost\": " << r.initial_cost << ", \"fdk_rms_error\": " << r.fdk_error
         << ", \"fdk_noise\": " << r.fdk_noise << ", \"svu_seconds_per_iteration\": " << r.svu_seconds
         << ", \"svu_extrapolated\": " << (r.svu_full ? "false" : "true")
         << ", \"svu_cost\": " << list(r.svu_cost) << ", \"svu_rms_error\": " << list(r.svu_error)
         << ", \"paired_steps\": " << r.paired_steps << ", \"paired_columns\": " << r.paired_columns
         << ", \"paired_seconds\": " << list(r.paired_seconds)
         << ", \"paired_cost\": " << list(r.paired_cost)
         << ", \"paired_rms_error\": " << list(r.paired_error)
         << ", \"kernel\": \"" << kernel_names[0] << "\", \"mvu_setup_seconds\": "
         << r.mvu_setup_seconds << ", \"svu_setup_seconds\": " << r.svu_setup_seconds
         << ", \"host_seconds\": " << r.host_seconds << ", \"other_kernels\": [";
    for (size_t k = 0; k < r.other_kernels.size(); ++k) {
      const KernelRun& run = r.other_kernels[k];
      json << (k ? ", " : "") << "{\"kernel\": \"" << run.kernel
           << "\", \"setup_seconds\": " << run.setup_seconds
           << ", \"seconds\": " << list(run.seconds) << ", \"cost\": " << list(run.cost) << "}";
    }
    json << "]}";
  }
  json << "]}\n";
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) { return tomo::bench::Main(argc, argv); }
