// The commands that need no daemon: phantom (test data with its exact answer), local (a
// job run in this process, the embedded path) and compare (RMSE of two raw images).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_common.h"
#include "client/cli/progress_bar.h"
#include "client/job_spec_json.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/raw_io.h"
#include "core/phantom/ellipse_phantom.h"
#include "server/job_execution.h"
#include "server/job_spec.h"

namespace tomo::cli {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;

// ----------------------------------------------------------------------------- phantom

struct PhantomArgs {
  std::string out_dir;
  int64_t size = 512;
  int64_t views = 720;
  int64_t detectors = 0;  // 0: DefaultDetectors(size)
  double voxel_size_mm = 0.5;
  std::string window = "ram-lak";
};

// Enough detectors to see the whole square grid from every angle: its diagonal, plus a
// margin of two elements on each side.
int64_t DefaultDetectors(int64_t size) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(size) * std::sqrt(2.0))) + 4;
}

int RunPhantom(const PhantomArgs& args) {
  const std::string what = "phantom";
  v1::FilterWindow window;
  if (!ParseWindow(args.window, &window)) {
    return Fail("phantom: usage",
                absl::StrCat("--window ", args.window, ": one of ",
                             absl::StrJoin(WindowNames(), ", ")),
                kExitUsage);
  }
  const int64_t detectors = args.detectors > 0 ? args.detectors : DefaultDetectors(args.size);
  absl::StatusOr<core::VolumeGeometry> volume =
      core::VolumeGeometry::Create({args.size, args.size, 1},
                                   {args.voxel_size_mm, args.voxel_size_mm, args.voxel_size_mm},
                                   {0, 0, 0});
  if (!volume.ok()) return Fail(what, volume.status());
  if (args.views < 1 || args.views > core::ParallelGeometry2D::kMaxViews) {
    return Fail("phantom: usage",
                absl::StrCat("--views ", args.views, " is out of range [1, ",
                             core::ParallelGeometry2D::kMaxViews, "]"),
                kExitUsage);
  }
  absl::StatusOr<core::ParallelGeometry2D> geometry = core::ParallelGeometry2D::Create(
      detectors, args.voxel_size_mm, 0.0,
      core::ParallelGeometry2D::UniformAngles(args.views, 0.0, M_PI));
  if (!geometry.ok()) return Fail(what, geometry.status());

  std::error_code error;
  fs::create_directories(args.out_dir, error);
  if (error) {
    return Fail(what, absl::StrCat("cannot create ", args.out_dir, ": ", error.message()),
                kExitError);
  }
  const fs::path dir(args.out_dir);
  const std::string sinogram_path = (dir / "sinogram.raw").string();
  const std::string spec_path = (dir / "job.json").string();
  const std::string truth_path = (dir / "truth.raw").string();

  const double radius_mm = static_cast<double>(args.size) * args.voxel_size_mm / 2.0;
  const core::EllipsePhantom phantom = core::EllipsePhantom::ModifiedSheppLogan(radius_mm);
  core::Array3D sinogram = phantom.ParallelProjections(*geometry, /*supersampling=*/4);
  if (absl::Status written = core::WriteRawFloat32(sinogram_path, sinogram); !written.ok()) {
    return Fail(what, written);
  }

  v1::JobSpec spec;
  spec.set_name(absl::StrFormat("shepp-logan %dx%d, %d views", args.size, args.size,
                                args.views));
  v1::ParallelBeam2D* parallel = spec.mutable_geometry()->mutable_parallel_2d();
  parallel->set_num_detectors(static_cast<uint32_t>(detectors));
  parallel->set_detector_spacing_mm(args.voxel_size_mm);
  parallel->set_detector_offset_mm(0.0);
  v1::UniformAngles* angles = parallel->mutable_angles()->mutable_uniform();
  angles->set_count(static_cast<uint32_t>(args.views));
  angles->set_start_deg(0.0);
  angles->set_span_deg(180.0);
  v1::Volume* vol = spec.mutable_volume();
  vol->mutable_size()->set_x(static_cast<uint32_t>(args.size));
  vol->mutable_size()->set_y(static_cast<uint32_t>(args.size));
  vol->mutable_size()->set_z(1);
  vol->mutable_voxel_size_mm()->set_x(args.voxel_size_mm);
  vol->mutable_voxel_size_mm()->set_y(args.voxel_size_mm);
  vol->mutable_voxel_size_mm()->set_z(args.voxel_size_mm);
  vol->mutable_center_mm();  // (0, 0, 0), printed so that the file shows it
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(static_cast<uint64_t>(sinogram.size_bytes()));
  spec.mutable_algorithm()->mutable_fbp()->set_window(window);
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  if (absl::Status written = client::WriteJobSpecFile(spec_path, spec); !written.ok()) {
    return Fail(what, written);
  }

  core::Array3D truth = phantom.Rasterize(*volume, /*supersampling=*/4);
  if (absl::Status written = core::WriteRawFloat32(truth_path, truth); !written.ok()) {
    return Fail(what, written);
  }
  std::cout << sinogram_path << "\n" << spec_path << "\n" << truth_path << std::endl;
  return kExitOk;
}

// ----------------------------------------------------------------------------- local

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

struct LocalArgs {
  std::string spec_path;
  std::vector<std::string> data_paths;
  std::string out_dir;
  std::string device;
};

int RunLocal(const GlobalOptions& global, const LocalArgs& args) {
  const std::string what = "local";
  if (args.data_paths.size() != 1) {
    return Fail("local: usage", "tomo local takes exactly one --data file", kExitUsage);
  }
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.spec_path);
  if (!spec.ok()) return Fail(what, spec.status());
  if (absl::Status sized = MatchDataSize(args.data_paths, &*spec); !sized.ok()) {
    return Fail(what, sized);
  }
  absl::StatusOr<server::ValidatedJob> job =
      server::ValidateJobSpec(*spec, server::ServerLimits{});
  if (!job.ok()) return Fail(what, job.status());

  std::vector<core::DeviceInfo> devices = core::ListDevices();
  if (devices.empty()) return Fail(what, "no device to compute on", kExitError);
  const core::DeviceInfo* device = &devices.front();
  if (!args.device.empty()) {
    device = nullptr;
    std::vector<std::string> ids;
    for (const core::DeviceInfo& d : devices) {
      ids.push_back(d.id);
      if (d.id == args.device) device = &d;
    }
    if (device == nullptr) {
      return Fail("local: usage",
                  absl::StrCat("--device ", args.device, " is not available here; devices: ",
                               absl::StrJoin(ids, ", ")),
                  kExitUsage);
    }
  }
  absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(*device);
  if (!backend.ok()) return Fail(absl::StrCat(what, ": device ", device->id), backend.status());
  const core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();

  std::error_code error;
  fs::create_directories(args.out_dir, error);
  if (error) {
    return Fail(what, absl::StrCat("cannot create ", args.out_dir, ": ", error.message()),
                kExitError);
  }

  ProgressBar bar(ProgressWanted(global));
  core::RunContext context;
  context.on_progress = [&bar](const core::ProgressUpdate& update) {
    std::string label = absl::StrCat("running ", update.stage);
    if (update.iterations_total > 1) {
      absl::StrAppend(&label, " ", update.iteration, "/", update.iterations_total);
    }
    bar.Update(update.fraction, label);
  };
  context.is_cancelled = [] { return g_interrupted.load(); };
  auto previous = std::signal(SIGINT, OnInterrupt);
  absl::StatusOr<std::vector<v1::ResultFile>> results = server::ExecuteJob(
      *job, args.data_paths.front(), args.out_dir, **backend, registry, context);
  std::signal(SIGINT, previous);
  bar.Finish();
  if (!results.ok()) {
    return Fail(absl::StrCat(what, " on ", device->id), results.status().message(),
                kExitJobFailed);
  }
  for (const v1::ResultFile& result : *results) {
    std::cout << (fs::path(args.out_dir) / result.name()).string() << "\n";
  }
  std::cout.flush();
  return kExitOk;
}

// ----------------------------------------------------------------------------- compare

struct CompareArgs {
  std::string reference_path;
  std::string image_path;
  std::string dims;
  double max_rmse = -1;  // < 0: no bound
};

absl::StatusOr<core::Dims3> CompareDims(const CompareArgs& args) {
  if (!args.dims.empty()) {
    std::vector<std::string> parts = absl::StrSplit(args.dims, ',');
    core::Dims3 dims;
    int64_t* fields[] = {&dims.d0, &dims.d1, &dims.d2};
    bool ok = parts.size() == 3;
    for (size_t i = 0; ok && i < 3; ++i) ok = absl::SimpleAtoi(parts[i], fields[i]) && *fields[i] > 0;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dims ", args.dims, ": expected Z,Y,X, three positive integers"));
    }
    return dims;
  }
  std::error_code error;
  const uintmax_t bytes = fs::file_size(args.reference_path, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", args.reference_path, ": ", error.message()));
  }
  const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
  const int64_t side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(count))));
  if (bytes % sizeof(float) != 0 || side * side != count || count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.reference_path, " holds ", bytes,
                     " bytes, not a square float32 image; give --dims Z,Y,X"));
  }
  return core::Dims3{1, side, side};
}

int RunCompare(const CompareArgs& args) {
  const std::string what = "compare";
  absl::StatusOr<core::Dims3> dims = CompareDims(args);
  if (!dims.ok()) return Fail(what, dims.status());
  absl::StatusOr<core::Array3D> reference = core::ReadRawFloat32(args.reference_path, *dims);
  if (!reference.ok()) return Fail(what, reference.status());
  absl::StatusOr<core::Array3D> image = core::ReadRawFloat32(args.image_path, *dims);
  if (!image.ok()) return Fail(what, image.status());

  double sum_squares = 0;
  double max_abs = 0;
  const float* a = reference->data();
  const float* b = image->data();
  const int64_t n = reference->size();
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(b[i]) - static_cast<double>(a[i]);
    sum_squares += d * d;
    max_abs = std::max(max_abs, std::abs(d));
  }
  const double rmse = std::sqrt(sum_squares / static_cast<double>(n));
  std::cout << absl::StrFormat("RMSE %.6g\n", rmse)
            << absl::StrFormat("max_abs_error %.6g\n", max_abs)
            << absl::StrFormat("dims %d,%d,%d\n", dims->d0, dims->d1, dims->d2);
  std::cout.flush();
  if (args.max_rmse >= 0 && !(rmse <= args.max_rmse)) {
    return Fail(what, absl::StrFormat("RMSE %.6g exceeds --max-rmse %.6g", rmse, args.max_rmse),
                kExitError);
  }
  return kExitOk;
}

}  // namespace

void AddLocalCommands(CLI::App& app, const GlobalOptions& global,
                      std::vector<Command>& commands) {
  const GlobalOptions* g = &global;
  {
    auto args = std::make_shared<PhantomArgs>();
    CLI::App* sub = app.add_subcommand(
        "phantom", "Write a modified Shepp-Logan test case into --out-dir: sinogram.raw (exact "
                   "line integrals, float32 view-column), job.json (its JobSpec, FBP) and "
                   "truth.raw (the phantom, float32 y-x). Prints the three paths.");
    sub->add_option("--out-dir", args->out_dir, "where the three files go")->required();
    sub->add_option("--size", args->size, "image side in pixels")->capture_default_str();
    sub->add_option("--views", args->views, "views over 180 degrees")->capture_default_str();
    sub->add_option("--detectors", args->detectors,
                    "detector elements (default ceil(size * sqrt 2) + 4)");
    sub->add_option("--voxel-size", args->voxel_size_mm,
                    "pixel and detector spacing in mm")
        ->capture_default_str();
    sub->add_option("--window", args->window,
                    "FBP window: ram-lak, shepp-logan, cosine, hamming, hann")
        ->capture_default_str();
    commands.push_back({sub, [args] { return RunPhantom(*args); }});
  }
  {
    auto args = std::make_shared<LocalArgs>();
    CLI::App* sub = app.add_subcommand(
        "local", "Run a job in this process, without tomod (the same validation and code as "
                 "the daemon's workers). Prints the result paths. Exits 3 when the run fails.");
    sub->add_option("--spec", args->spec_path, "JobSpec JSON file")->required();
    sub->add_option("--data", args->data_paths, "projection data file")->required();
    sub->add_option("--out", args->out_dir, "result directory")->required();
    sub->add_option("--device", args->device, "cpu or cuda:N (default: the first device)");
    commands.push_back({sub, [g, args] { return RunLocal(*g, *args); }});
  }
  {
    auto args = std::make_shared<CompareArgs>();
    CLI::App* sub = app.add_subcommand(
        "compare", "Compare two raw float32 images: prints \"RMSE <value>\", "
                   "\"max_abs_error <value>\" and the dims.");
    sub->add_option("--reference", args->reference_path, "the true image")->required();
    sub->add_option("--image", args->image_path, "the image to judge")->required();
    sub->add_option("--dims", args->dims,
                    "Z,Y,X (default: one square slice inferred from the size)");
    sub->add_option("--max-rmse", args->max_rmse, "exit 1 when the RMSE is above this");
    commands.push_back({sub, [args] { return RunCompare(*args); }});
  }
}

}  // namespace tomo::cli
