// iterative-study: the semi-convergence experiment of the published studies of block-iterative
// algebraic methods for 3D GPU reconstruction, on tomoserve's
// iterative methods, for bench/NOTES.md (issue 6).
//
// The problem: a 256^3 volume of 1 mm voxels holding the 3D Shepp-Logan phantom (radius
// 115 mm, core/phantom/ellipsoid_phantom.h), 295 parallel-beam views of 256 x 256 pixels of
// 1 mm over [0, pi) (rays in the x-y plane, the study's "test setup 2"), its exact line
// integrals b, and Gaussian noise e scaled so that ||e|| / ||b|| = 0.05 (fixed seed).
// For each method (SIRT, SART, the block-iterative method with several block counts) the
// relative error ||x_k - x_true|| / ||x_true|| is recorded after every iteration (the
// volume is downloaded for it: those runs are not timed); then the method is run again for
// exactly the best iteration count, timed from host data to host result (upload, weights,
// iterations, download: the study's "total reconstruction time"), and the iterations alone.
//
// Output: a CSV (method, iteration, relative error, relative residual) and a summary table
// on stdout.
//
// --order-study: the view-order experiment behind the SART/OS-SART defaults
// (docs/iterative.md) instead, small enough for the CPU: a 2D modified Shepp-Logan
// (densities in [0, 1]) on 127 x 127 pixels of 0.7 mm, 180 parallel views over [0, pi) of
// 181 detectors of 0.7 mm (--order-views to change), its exact line integrals, clean and with 5% Gaussian noise
// (fixed seed); SART and OS-SART (15 blocks) in each view order at several relaxations,
// RMSE against the rasterised phantom after every sweep (CSV; table of sweeps 1, 2, 5).
//
//   build/bin/iterative-study --csv study.csv [--device cuda:0] [--sirt-iterations 300]
//   build/bin/iterative-study --order-study --device cpu --csv orders.csv
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/block_iterative.h"
#include "core/algorithms/sirt.h"
#include "core/devices/devices.h"
#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"

namespace tomo::bench {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct Method {
  std::string name;
  int64_t blocks;  // 1: SIRT; views: SART
  double relaxation;
  int64_t iterations;
};

double RelativeError(const core::Array3D& image, const core::Array3D& truth) {
  double difference = 0, norm = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = static_cast<double>(image.data()[i]) - truth.data()[i];
    difference += d * d;
    norm += static_cast<double>(truth.data()[i]) * truth.data()[i];
  }
  return std::sqrt(difference / norm);
}

double Rmse(const core::Array3D& image, const core::Array3D& truth) {
  double sum = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = static_cast<double>(image.data()[i]) - truth.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(truth.size()));
}

const char* OrderName(core::ViewOrder order) {
  switch (order) {
    case core::ViewOrder::kSequential:
      return "sequential";
    case core::ViewOrder::kInterleaved:
      return "interleaved";
    case core::ViewOrder::kGoldenRatio:
      return "golden-ratio";
    case core::ViewOrder::kRandom:
      return "random";
  }
  return "?";
}

// The view-order experiment (see the top of the file).
int OrderStudy(core::Backend& backend, const std::string& csv_path, int64_t views,
               int64_t sweeps) {
  const int64_t n = 127, detectors = 181;
  const double pixel_mm = 0.7;
  const core::VectorGeometry geometry =
      core::MakeParallel2D({1, detectors, pixel_mm, pixel_mm, 0, 0},
                           core::UniformAnglesRad(views, 0, kPi))
          .value();
  const core::VolumeGeometry volume =
      core::VolumeGeometry::Create({n, n, 1}, {pixel_mm, pixel_mm, pixel_mm}, {}).value();
  const core::EllipsePhantom flat =
      core::EllipsePhantom::ModifiedSheppLogan(0.5 * static_cast<double>(n) * pixel_mm);
  const core::Array3D clean = core::EllipsoidPhantom::ExtrudedFrom(flat).Project(geometry, 4);
  const core::Array3D truth = flat.Rasterize(volume, 4);
  core::Array3D noisy = clean.Clone();
  {
    std::mt19937_64 random(20261128);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> e(static_cast<size_t>(noisy.size()));
    double e2 = 0, b2 = 0;
    for (int64_t i = 0; i < noisy.size(); ++i) {
      e[static_cast<size_t>(i)] = normal(random);
      e2 += e[static_cast<size_t>(i)] * e[static_cast<size_t>(i)];
      b2 += static_cast<double>(noisy.data()[i]) * noisy.data()[i];
    }
    const double scale = 0.05 * std::sqrt(b2 / e2);
    for (int64_t i = 0; i < noisy.size(); ++i) {
      noisy.data()[i] += static_cast<float>(scale * e[static_cast<size_t>(i)]);
    }
  }
  std::ofstream csv(csv_path);
  csv << "data,method,blocks,order,relaxation,sweep,rmse\n";
  std::printf("%-6s %-8s %-13s %6s %8s %8s %8s %8s\n", "data", "method", "order", "lambda",
              "sweep 1", "sweep 2", "sweep 5", "best");
  const core::ViewOrder orders[] = {core::ViewOrder::kSequential, core::ViewOrder::kInterleaved,
                                    core::ViewOrder::kGoldenRatio, core::ViewOrder::kRandom};
  for (const auto& [data_name, data] :
       {std::pair<const char*, const core::Array3D*>{"clean", &clean}, {"noisy", &noisy}}) {
    for (const int64_t blocks : {views, int64_t{15}}) {
      const char* method = blocks == views ? "SART" : "OS-SART";
      const std::vector<double> relaxations =
          blocks == views ? std::vector<double>{0.25, 0.5, 1.0, 1.5}
                          : std::vector<double>{0.5, 1.0, 1.5};
      for (const core::ViewOrder order : orders) {
        for (const double lambda : relaxations) {
          std::vector<double> errors;
          core::IterativeOptions options;
          options.iterations = sweeps;
          options.relaxation = lambda;
          options.observe_volume = true;
          options.on_iteration = [&](const core::IterationReport& report) {
            errors.push_back(Rmse(*report.volume, truth));
            return absl::OkStatus();
          };
          auto result = core::BlockIterative(geometry, volume, *data, options, blocks, order,
                                             backend, {});
          if (!result.ok()) {
            std::fprintf(stderr, "iterative-study: %s\n",
                         std::string(result.status().message()).c_str());
            return 1;
          }
          for (size_t k = 0; k < errors.size(); ++k) {
            csv << data_name << "," << method << "," << blocks << "," << OrderName(order) << ","
                << lambda << "," << k + 1 << "," << errors[k] << "\n";
          }
          const auto at = [&](int64_t sweep) {
            return sweep <= static_cast<int64_t>(errors.size())
                       ? errors[static_cast<size_t>(sweep - 1)]
                       : std::nan("");
          };
          std::printf("%-6s %-8s %-13s %6.2f %8.4f %8.4f %8.4f %8.4f\n", data_name, method,
                      OrderName(order), lambda, at(1), at(2), at(5),
                      *std::min_element(errors.begin(), errors.end()));
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"iterative-study: semi-convergence of SIRT, SART and OS-SART (issue 6)"};
  std::string csv_path = "iterative_study.csv";
  std::string device_id;
  int64_t n = 256, views = 295, sirt_iterations = 300, sart_iterations = 20;
  double noise = 0.05;
  app.add_option("--csv", csv_path, "per-iteration errors as CSV");
  app.add_option("--device", device_id, "device id (default: the first)");
  app.add_option("--size", n, "volume side and detector side")->capture_default_str();
  app.add_option("--views", views, "views over [0, pi)")->capture_default_str();
  app.add_option("--noise", noise, "relative noise level ||e|| / ||b||")->capture_default_str();
  app.add_option("--sirt-iterations", sirt_iterations, "SIRT iterations")->capture_default_str();
  app.add_option("--sart-iterations", sart_iterations, "SART iterations")->capture_default_str();
  bool order_study = false;
  int64_t order_sweeps = 5, order_views = 180;
  app.add_flag("--order-study", order_study,
               "the view-order experiment (2D, small enough for the CPU) instead");
  app.add_option("--order-sweeps", order_sweeps, "sweeps per run of --order-study")
      ->capture_default_str();
  app.add_option("--order-views", order_views, "views over [0, pi) in --order-study")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<core::DeviceInfo> devices = core::ListDevices();
  const core::DeviceInfo* chosen = &devices.front();
  for (const core::DeviceInfo& d : devices) {
    if (d.id == device_id) chosen = &d;
  }
  auto backend = core::MakeBackend(*chosen);
  if (!backend.ok()) {
    std::fprintf(stderr, "iterative-study: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  std::printf("device %s (%s)\n", chosen->id.c_str(), chosen->name.c_str());
  if (order_study) return OrderStudy(**backend, csv_path, order_views, order_sweeps);

  core::DetectorLayout detector{n, n, 1.0, 1.0, 0, 0};
  const core::VectorGeometry geometry =
      core::MakeParallel3D(detector, core::UniformAnglesRad(views, 0, kPi)).value();
  const core::VolumeGeometry volume =
      core::VolumeGeometry::Create({n, n, n}, {1, 1, 1}, {}).value();
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(0.45 * n);
  auto t0 = std::chrono::steady_clock::now();
  core::Array3D projections = phantom.Project(geometry, 1);
  const core::Array3D truth = phantom.Rasterize(volume, 2);
  std::printf("data: %lld^3 volume, %lld views of %lld^2, made in %.1f s\n",
              static_cast<long long>(n), static_cast<long long>(views),
              static_cast<long long>(n),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // Noise: e ~ N(0, 1) scaled to ||e|| = noise ||b||.
  std::mt19937_64 random(20261122);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> e(static_cast<size_t>(projections.size()));
  double e2 = 0, b2 = 0;
  for (int64_t i = 0; i < projections.size(); ++i) {
    e[static_cast<size_t>(i)] = normal(random);
    e2 += e[static_cast<size_t>(i)] * e[static_cast<size_t>(i)];
    b2 += static_cast<double>(projections.data()[i]) * projections.data()[i];
  }
  const double scale = noise * std::sqrt(b2 / e2);
  for (int64_t i = 0; i < projections.size(); ++i) {
    projections.data()[i] += static_cast<float>(scale * e[static_cast<size_t>(i)]);
  }

  const std::vector<Method> methods = {
      {"SIRT", 1, 1.9, sirt_iterations},
      {"OS-SART 5 blocks", 5, 1.0, 60},
      {"OS-SART 15 blocks", 15, 1.0, 40},
      {"OS-SART 59 blocks", 59, 1.0, 30},
      {"SART", views, 1.0, sart_iterations},
      {"SART lambda 0.5", views, 0.5, sart_iterations},
      {"SART lambda 0.25", views, 0.25, sart_iterations},
      {"SART lambda 0.1", views, 0.1, sart_iterations},
  };
  std::ofstream csv(csv_path);
  csv << "method,blocks,relaxation,iteration,relative_error,relative_residual\n";
  std::printf("%-20s %7s %7s %10s %10s %14s %14s %12s\n", "method", "blocks", "lambda",
              "best iter", "best error", "to best, s", "iterations, s", "s/iteration");
  for (const Method& m : methods) {
    std::vector<double> errors;
    core::IterativeOptions options;
    options.iterations = m.iterations;
    options.relaxation = m.relaxation;
    options.observe_volume = true;
    options.on_iteration = [&](const core::IterationReport& report) {
      errors.push_back(RelativeError(*report.volume, truth));
      return absl::OkStatus();
    };
    // SIRT through its own code (sirt.h); the rest through the block-iterative method.
    auto run = [&](const core::IterativeOptions& o) {
      return m.blocks == 1 ? core::Sirt(geometry, volume, projections, o, **backend, {})
                           : core::BlockIterative(geometry, volume, projections, o, m.blocks,
                                                  core::ViewOrder::kInterleaved, **backend, {});
    };
    auto observed = run(options);
    if (!observed.ok()) {
      std::fprintf(stderr, "iterative-study: %s: %s\n", m.name.c_str(),
                   std::string(observed.status().message()).c_str());
      return 1;
    }
    size_t best = 0;
    for (size_t k = 0; k < errors.size(); ++k) {
      csv << m.name << "," << m.blocks << "," << m.relaxation << "," << k + 1 << ","
          << errors[k] << "," << observed->relative_residuals[k] << "\n";
      if (errors[k] < errors[best]) best = k;
    }
    // Timed: exactly best + 1 iterations from host data to host result, no observer but a
    // clock at the first and last iteration's end.
    core::IterativeOptions timed;
    timed.iterations = static_cast<int64_t>(best) + 1;
    timed.relaxation = m.relaxation;
    std::vector<std::chrono::steady_clock::time_point> ends;
    timed.on_iteration = [&ends](const core::IterationReport&) {
      ends.push_back(std::chrono::steady_clock::now());
      return absl::OkStatus();
    };
    const auto start = std::chrono::steady_clock::now();
    auto result = run(timed);
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                             .count();
    if (!result.ok()) return 1;
    const double check = RelativeError(result->volume, truth);
    const double per_iteration =
        ends.size() > 1 ? std::chrono::duration<double>(ends.back() - ends.front()).count() /
                              static_cast<double>(ends.size() - 1)
                        : 0.0;
    std::printf("%-20s %7lld %7.2f %10zu %10.4f %14.3f %14.3f %12.4f   (rerun error %.4f)\n",
                m.name.c_str(), static_cast<long long>(m.blocks), m.relaxation, best + 1,
                errors[best], total, per_iteration * static_cast<double>(best + 1),
                per_iteration, check);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) { return tomo::bench::Main(argc, argv); }
