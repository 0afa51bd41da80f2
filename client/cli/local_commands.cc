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

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_common.h"
#include "client/cli/joined_input.h"
#include "client/cli/dicom_ct_pd_phantom.h"
#include "client/cli/output_commands.h"
#include "client/cli/phantom_cases.h"
#include "client/cli/progress_bar.h"
#include "client/job_spec_json.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/raw_io.h"
#include "core/phantom/ellipse_phantom.h"
#include "runner/job_execution.h"
#include "runner/job_spec.h"

namespace tomo::cli {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;

// ----------------------------------------------------------------------------- phantom

struct PhantomArgs {
  std::string out_dir;
  std::string geometry = "parallel-2d";
  int64_t size = 512;
  int64_t views = 720;
  int64_t detectors = 0;  // 0: enough to see the whole grid
  double voxel_size_mm = 0.5;
  std::string window = "ram-lak";
  std::string algorithm = "fbp";  // fbp, sirt, sart, os-sart, cgls, art, icd
  uint32_t iterations = 20;       // iterative methods
  uint32_t blocks = 10;           // os-sart
};

// The photons per unattenuated pixel an icd phantom job states for its weights.
constexpr double kPhantomFlatFieldPhotons = 1e5;

int RunPhantom(const GlobalOptions& global, const PhantomArgs& args) {
  const std::string what = "phantom";
  v1::FilterWindow window;
  if (!ParseWindow(args.window, &window)) {
    return Fail("phantom: usage",
                absl::StrCat("--window ", args.window, ": one of ",
                             absl::StrJoin(WindowNames(), ", ")),
                kExitUsage);
  }
  if (args.geometry == "dicom-ct-pd") {
    // A scan in the format of real CT scanners: files, not a sinogram (dicom_ct_pd_phantom.h).
    absl::StatusOr<std::vector<std::string>> written =
        WriteDicomCtPdPhantom(args.out_dir, args.size, args.views, args.voxel_size_mm);
    if (!written.ok()) {
      if (absl::StartsWith(written.status().message(), "--")) {
        return Fail("phantom: usage", written.status().message(), kExitUsage);
      }
      return Fail(what, written.status());
    }
    for (const std::string& path : *written) PrintPath(global, path);
    std::cout.flush();
    return kExitOk;
  }
  PhantomCaseOptions options;
  if (args.geometry == "parallel-2d") {
    options.geometry = PhantomGeometry::kParallel2D;
  } else if (args.geometry == "fan-2d") {
    options.geometry = PhantomGeometry::kFan2D;
  } else if (args.geometry == "cone") {
    options.geometry = PhantomGeometry::kCone;
  } else if (args.geometry == "radon-3d") {
    options.geometry = PhantomGeometry::kRadon3D;
  } else {
    return Fail("phantom: usage",
                absl::StrCat("--geometry ", args.geometry,
                             ": one of parallel-2d, fan-2d, cone, radon-3d, dicom-ct-pd"),
                kExitUsage);
  }
  options.size = args.size;
  options.views = args.views;
  options.detectors = args.detectors;
  options.voxel_size_mm = args.voxel_size_mm;
  absl::StatusOr<PhantomCase> phantom = MakePhantomCase(options);
  if (!phantom.ok()) {
    if (absl::StartsWith(phantom.status().message(), "--")) {
      return Fail("phantom: usage", phantom.status().message(), kExitUsage);
    }
    return Fail(what, phantom.status());
  }

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
  if (absl::Status written = core::WriteRawFloat32(sinogram_path, phantom->projections);
      !written.ok()) {
    return Fail(what, written);
  }

  v1::JobSpec spec;
  spec.set_name(phantom->description);
  *spec.mutable_geometry() = phantom->geometry;
  *spec.mutable_volume() = phantom->volume;
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(static_cast<uint64_t>(phantom->projections.size_bytes()));
  if (args.algorithm == "fbp") {
    spec.mutable_algorithm()->mutable_fbp()->set_window(window);
  } else if (args.algorithm == "sirt") {
    spec.mutable_algorithm()->mutable_sirt()->set_iterations(args.iterations);
  } else if (args.algorithm == "sart") {
    spec.mutable_algorithm()->mutable_sart()->mutable_iterative()->set_iterations(args.iterations);
  } else if (args.algorithm == "os-sart") {
    auto* os_sart = spec.mutable_algorithm()->mutable_os_sart();
    os_sart->mutable_iterative()->set_iterations(args.iterations);
    os_sart->set_blocks(args.blocks);
    os_sart->set_order(v1::VIEW_ORDER_INTERLEAVED);
  } else if (args.algorithm == "cgls") {
    spec.mutable_algorithm()->mutable_cgls()->set_iterations(args.iterations);
  } else if (args.algorithm == "art") {
    spec.mutable_algorithm()->mutable_art()->set_iterations(args.iterations);
  } else if (args.algorithm == "icd") {
    // Noise-free data: any photon count weighs every ray alike up to its attenuation.
    auto* icd = spec.mutable_algorithm()->mutable_icd();
    icd->set_iterations(args.iterations);
    icd->mutable_weights()->set_flat_field_photons(kPhantomFlatFieldPhotons);
  } else {
    return Fail("phantom: usage",
                absl::StrCat("--algorithm ", args.algorithm,
                             ": one of fbp, sirt, sart, os-sart, cgls, art, icd"),
                kExitUsage);
  }
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  if (absl::Status written = client::WriteJobSpecFile(spec_path, spec); !written.ok()) {
    return Fail(what, written);
  }
  if (absl::Status written = core::WriteRawFloat32(truth_path, phantom->truth); !written.ok()) {
    return Fail(what, written);
  }
  for (const std::string& path : {sinogram_path, spec_path, truth_path}) PrintPath(global, path);
  std::cout.flush();
  return kExitOk;
}

// ----------------------------------------------------------------------------- local

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

struct LocalArgs {
  std::string spec_path;
  std::vector<std::string> data_paths;
  std::string out_dir;
  std::string device;           // "cuda:0" or a comma list "cuda:0,cuda:1"
  uint64_t memory_budget_bytes = 0;  // 0: the device's free memory
  OutputFlags outputs;                // --format, --water-attenuation
};

int RunLocal(const GlobalOptions& global, const LocalArgs& args) {
  const std::string what = "local";
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.spec_path);
  if (!spec.ok()) return Fail(what, spec.status());
  std::vector<std::string> data_paths = args.data_paths;
  if (absl::Status sized = PrepareInputFiles(&data_paths, &*spec); !sized.ok()) {
    return Fail(what, sized);
  }
  if (absl::Status applied = ApplyOutputFlags(args.outputs, &*spec); !applied.ok()) {
    return Fail("local: usage", applied.message(), kExitUsage);
  }
  absl::StatusOr<server::ValidatedJob> job =
      server::ValidateJobSpec(*spec, server::ServerLimits{});
  if (!job.ok()) return Fail(what, job.status());

  std::vector<core::DeviceInfo> devices = core::ListDevices();
  if (devices.empty()) return Fail(what, "no device to compute on", kExitError);
  // The devices to share the job among: --device, a comma list; default the first device.
  std::vector<const core::DeviceInfo*> chosen;
  if (args.device.empty()) {
    chosen.push_back(&devices.front());
  } else {
    std::vector<std::string> ids;
    for (const core::DeviceInfo& d : devices) ids.push_back(d.id);
    for (absl::string_view wanted : absl::StrSplit(args.device, ',', absl::SkipWhitespace())) {
      const core::DeviceInfo* device = nullptr;
      for (const core::DeviceInfo& d : devices) {
        if (d.id == wanted) device = &d;
      }
      if (device == nullptr) {
        return Fail("local: usage",
                    absl::StrCat("--device ", wanted, " is not available here; devices: ",
                                 absl::StrJoin(ids, ", ")),
                    kExitUsage);
      }
      for (const core::DeviceInfo* seen : chosen) {
        if (seen == device) {
          return Fail("local: usage", absl::StrCat("--device ", wanted, " is listed twice"),
                      kExitUsage);
        }
      }
      chosen.push_back(device);
    }
    if (chosen.empty()) return Fail("local: usage", "--device lists no device", kExitUsage);
  }
  std::vector<std::unique_ptr<core::Backend>> owned;
  std::vector<core::Backend*> backends;
  std::vector<std::string> chosen_ids;
  // The budget: the smallest non-zero of the spec's, --memory-budget and the smallest free
  // memory of the chosen GPUs (the CPU has no limit of its own).
  uint64_t device_free = 0;
  for (const core::DeviceInfo* device : chosen) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(*device);
    if (!backend.ok()) {
      return Fail(absl::StrCat(what, ": device ", device->id), backend.status());
    }
    backends.push_back(backend->get());
    owned.push_back(std::move(*backend));
    chosen_ids.push_back(device->id);
    if (device->kind == core::DeviceKind::kCuda) {
      device_free = server::EffectiveMemoryBudget(device_free, device->memory_free_bytes, 0);
    }
  }
  const std::string device_names = absl::StrJoin(chosen_ids, ",");
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
    if (!update.note.empty()) std::fprintf(stderr, "%s\n", update.note.c_str());
    std::string label = "running";
    if (update.iterations_total > 1) {
      absl::StrAppend(&label, " ", update.iteration, "/", update.iterations_total);
    }
    absl::StrAppend(&label, " ", update.stage);
    bar.Update(update.fraction, label);
  };
  context.is_cancelled = [] { return g_interrupted.load(); };
  context.memory_budget_bytes =
      server::EffectiveMemoryBudget(job->memory_budget_bytes, args.memory_budget_bytes, device_free);
  // Several files are joined in the result directory (removed afterwards).
  JoinedInput input_file;
  if (absl::Status joined =
          input_file.Join(data_paths, (fs::path(args.out_dir) / ".tomo_local_input.bin").string());
      !joined.ok()) {
    return Fail(what, joined.message(), kExitError);
  }
  auto previous = std::signal(SIGINT, OnInterrupt);
  absl::StatusOr<std::vector<v1::ResultFile>> results = server::ExecuteJob(
      *job, input_file.path(), args.out_dir, backends, registry, context);
  std::signal(SIGINT, previous);
  bar.Finish();
  if (!results.ok()) {
    return Fail(absl::StrCat(what, " on ", device_names), results.status().message(),
                kExitJobFailed);
  }
  for (const v1::ResultFile& result : *results) {
    const std::string path = (fs::path(args.out_dir) / result.name()).string();
    if (result.format() == v1::OUTPUT_FORMAT_DICOM_CT_SERIES) {
      // As `tomo fetch --format dicom`: a folder of .dcm files rather than the tar.
      absl::StatusOr<std::string> folder = UnpackDicomSeries(path, args.out_dir);
      if (!folder.ok()) return Fail(what, folder.status());
      PrintPath(global, *folder);
      continue;
    }
    PrintPath(global, path);
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

// The dims: --dims, else the sidecar of the image (volume.raw -> volume.json, as tomod's raw
// output has one), else the reference's, else one square slice inferred from the size.
absl::StatusOr<core::Dims3> CompareDims(const CompareArgs& args) {
  if (args.dims.empty()) {
    for (const std::string& raw : {args.image_path, args.reference_path}) {
      const std::string sidecar = fs::path(raw).replace_extension(".json").string();
      std::error_code error;
      if (sidecar == raw || !fs::exists(sidecar, error)) continue;
      absl::StatusOr<core::VolumeGeometry> grid = GeometryFromSidecar(sidecar);
      if (!grid.ok()) return grid.status();
      return grid->dims();
    }
  }
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

int RunCompare(const GlobalOptions& global, const CompareArgs& args) {
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
  if (global.json) {
    JsonField("rmse", rmse);
    JsonField("maxAbsError", max_abs);
    JsonField("dims", nlohmann::ordered_json::array({dims->d0, dims->d1, dims->d2}));
  } else {
    std::cout << absl::StrFormat("RMSE %.6g\n", rmse)
              << absl::StrFormat("max_abs_error %.6g\n", max_abs)
              << absl::StrFormat("dims %d,%d,%d\n", dims->d0, dims->d1, dims->d2);
    std::cout.flush();
  }
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
        "phantom", "Write a Shepp-Logan test case into --out-dir: sinogram.raw (its exact "
                   "line integrals, float32 view-row-column), job.json (its JobSpec: FBP, "
                   "or --algorithm) and truth.raw (the phantom, float32 z-y-x). Prints the "
                   "three paths.");
    sub->add_option("--out-dir", args->out_dir, "where the three files go")->required();
    sub->add_option("--geometry", args->geometry,
                    "parallel-2d (views over 180 degrees), fan-2d or cone (views over 360 "
                    "degrees; cone: a size^3 volume and the 3D phantom), radon-3d (the 3D "
                    "phantom's plane integrals along --views uniform directions, for EPR "
                    "imaging), dicom-ct-pd (the 3D phantom as DICOM-CT-PD files in scan/, "
                    "job.json, truth.raw)")
        ->capture_default_str();
    sub->add_option("--size", args->size, "grid side in voxels")->capture_default_str();
    sub->add_option("--views", args->views, "number of views (radon-3d: of directions)")->capture_default_str();
    sub->add_option("--detectors", args->detectors,
                    "detector columns (default: enough to see the whole grid)");
    sub->add_option("--voxel-size", args->voxel_size_mm,
                    "voxel size in mm (the detector spacing follows, times the magnification)")
        ->capture_default_str();
    sub->add_option("--window", args->window,
                    "FBP window: ram-lak, shepp-logan, cosine, hamming, hann")
        ->capture_default_str();
    sub->add_option("--algorithm", args->algorithm,
                    "the job's algorithm: fbp, sirt, sart, os-sart (interleaved blocks), cgls or "
                    "art (on a stored system matrix; fan-2d only) or icd (statistical, PWLS with the "
                    "q-GGMRF prior; cone only, weights for 1e5 photons per pixel)")
        ->capture_default_str();
    sub->add_option("--iterations", args->iterations, "iterations of an iterative algorithm")
        ->capture_default_str();
    sub->add_option("--blocks", args->blocks, "os-sart: number of blocks of views")
        ->capture_default_str();
    commands.push_back({sub, [g, args] { return RunPhantom(*g, *args); }});
  }
  {
    auto args = std::make_shared<LocalArgs>();
    CLI::App* sub = app.add_subcommand(
        "local", "Run a job in this process, without tomod (the same validation and code as "
                 "the daemon's workers). Prints the result paths. Exits 3 when the run fails.");
    sub->add_option("--spec", args->spec_path, "JobSpec JSON file")->required();
    sub->add_option("--data", args->data_paths,
                    "projection data file(s) or directories (a DICOM-CT-PD series, a TIFF "
                    "stack: their files sorted by name), read back to back in order")
        ->required();
    sub->add_option("--out", args->out_dir, "result directory")->required();
    sub->add_option("--device", args->device,
                    "cpu or cuda:N, or a comma list (cuda:0,cuda:1) to share the job's z-slabs "
                    "among several devices (default: the first device)");
    sub->add_option("--memory-budget", args->memory_budget_bytes,
                    "most device memory the job may use, in bytes (0: the device's free "
                    "memory); a job that does not fit is reconstructed in z-slabs that do")
        ->capture_default_str();
    AddOutputFlags(sub, &args->outputs);
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
                    "Z,Y,X (default: from the image's or the reference's sidecar, volume.json "
                    "next to volume.raw, else one square slice inferred from the size)");
    sub->add_option("--max-rmse", args->max_rmse, "exit 1 when the RMSE is above this");
    commands.push_back({sub, [g, args] { return RunCompare(*g, *args); }});
  }
}

}  // namespace tomo::cli
