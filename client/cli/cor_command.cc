// `tomo cor`: estimates the centre of rotation of a scan on this machine, without tomod,
// with the same input reading, preprocessing and estimate as a job that asks for one
// (geometry.*.center_of_rotation.estimate; server/job_center_of_rotation.h). Prints the
// estimate and the JobSpec field that sets it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli_common.h"
#include "client/cli/joined_input.h"
#include "client/job_spec_json.h"
#include "core/devices/devices.h"
#include "core/operators/backend.h"
#include "runner/job_center_of_rotation.h"
#include "runner/job_input.h"
#include "runner/job_spec.h"

namespace tomo::cli {
namespace {

namespace v1 = ::tomoserve::v1;
namespace fs = std::filesystem;

struct CorArgs {
  std::string spec_path;
  std::vector<std::string> data_paths;
  std::string method = "automatic";
  double search_radius = 0;
  int64_t row = -1;
  std::string device;
};

// The spec's circular geometry with its centre replaced by an estimate request; the name of
// the field the answer goes in. INVALID_ARGUMENT for other geometry kinds.
absl::StatusOr<std::string> AskForEstimate(v1::JobSpec& spec,
                                           const v1::CenterOfRotationEstimate& estimate) {
  v1::Geometry* g = spec.mutable_geometry();
  switch (g->kind_case()) {
    case v1::Geometry::kParallel2D:
      g->mutable_parallel_2d()->clear_detector_offset_mm();
      *g->mutable_parallel_2d()->mutable_center_of_rotation()->mutable_estimate() = estimate;
      return std::string("geometry.parallel_2d.center_of_rotation.column");
    case v1::Geometry::kFan2D:
      g->mutable_fan_2d()->clear_detector_offset_mm();
      *g->mutable_fan_2d()->mutable_center_of_rotation()->mutable_estimate() = estimate;
      return std::string("geometry.fan_2d.center_of_rotation.column");
    case v1::Geometry::kParallel3D:
      g->mutable_parallel_3d()->mutable_detector()->clear_offset_u_mm();
      *g->mutable_parallel_3d()->mutable_center_of_rotation()->mutable_estimate() = estimate;
      return std::string("geometry.parallel_3d.center_of_rotation.column");
    case v1::Geometry::kCone:
      g->mutable_cone()->mutable_detector()->clear_offset_u_mm();
      *g->mutable_cone()->mutable_center_of_rotation()->mutable_estimate() = estimate;
      return std::string("geometry.cone.center_of_rotation.column");
    default:
      return absl::InvalidArgumentError(
          "geometry: the centre of rotation is estimated for parallel_2d, fan_2d, parallel_3d "
          "and cone scans");
  }
}

int RunCor(const CorArgs& args) {
  const std::string what = "cor";
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.spec_path);
  if (!spec.ok()) return Fail(what, spec.status());
  v1::CenterOfRotationEstimate estimate;
  if (args.method == "automatic") {
    estimate.set_method(v1::CENTER_OF_ROTATION_METHOD_AUTOMATIC);
  } else if (args.method == "opposing-rays") {
    estimate.set_method(v1::CENTER_OF_ROTATION_METHOD_OPPOSING_RAYS);
  } else if (args.method == "sharpness") {
    estimate.set_method(v1::CENTER_OF_ROTATION_METHOD_SHARPNESS);
  } else {
    return Fail("cor: usage",
                absl::StrCat("--method ", args.method,
                             ": one of automatic, opposing-rays, sharpness"),
                kExitUsage);
  }
  estimate.set_search_radius_columns(args.search_radius);
  if (args.row >= 0) estimate.set_row(static_cast<uint32_t>(args.row));
  absl::StatusOr<std::string> field = AskForEstimate(*spec, estimate);
  if (!field.ok()) return Fail(what, field.status());
  std::vector<std::string> data_paths = args.data_paths;
  if (absl::Status sized = PrepareInputFiles(&data_paths, &*spec); !sized.ok()) {
    return Fail(what, sized);
  }
  absl::StatusOr<server::ValidatedJob> job =
      server::ValidateJobSpec(*spec, server::ServerLimits{});
  if (!job.ok()) return Fail(what, job.status());

  std::vector<core::DeviceInfo> devices = core::ListDevices();
  const core::DeviceInfo* device = devices.empty() ? nullptr : &devices.front();
  for (const core::DeviceInfo& d : devices) {
    if (d.id == args.device) device = &d;
  }
  if (device == nullptr || (!args.device.empty() && device->id != args.device)) {
    return Fail("cor: usage", absl::StrCat("--device ", args.device, " is not available here"),
                kExitUsage);
  }
  absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(*device);
  if (!backend.ok()) return Fail(absl::StrCat(what, ": device ", device->id), backend.status());

  JoinedInput input_file;
  std::error_code no_temp;
  const std::string scratch =
      (fs::temp_directory_path(no_temp) / absl::StrCat(".tomo_cor_input_", ::getpid(), ".bin"))
          .string();
  if (absl::Status joined = input_file.Join(data_paths, scratch); !joined.ok()) {
    return Fail(what, joined.message(), kExitError);
  }
  absl::StatusOr<server::JobInput> input = server::ResolveJobInput(*job, input_file.path());
  if (!input.ok()) return Fail(what, input.status());
  for (const std::string& note : input->notes) std::fprintf(stderr, "%s\n", note.c_str());
  absl::StatusOr<core::ReconstructionRequest> request = server::RequestForInput(*job, *input);
  if (!request.ok()) return Fail(what, request.status());
  absl::StatusOr<std::string> note =
      server::EstimateJobCenterOfRotation(*job, *input, *request, **backend, core::RunContext{});
  if (!note.ok()) return Fail(what, note.status());
  std::cout << *note << "\n";
  // The column, as the JobSpec takes it: the note's number (two decimals) in full.
  const size_t at = note->find("column ");
  if (at != std::string::npos) {
    std::cout << *field << " = " << note->substr(at + 7, note->find(' ', at + 7) - at - 7)
              << std::endl;
  }
  return kExitOk;
}

}  // namespace

void AddCenterOfRotationCommands(CLI::App& app, std::vector<Command>& commands) {
  auto args = std::make_shared<CorArgs>();
  CLI::App* sub = app.add_subcommand(
      "cor",
      "Estimate the centre of rotation of a scan in this process (the spec's input, "
      "preprocessing and geometry; its centre or offset is ignored): prints the estimate and "
      "the JobSpec field to set, geometry.<kind>.center_of_rotation.column. Exits 1 when no "
      "estimate is possible (it says why).");
  sub->add_option("--spec", args->spec_path, "JobSpec JSON file")->required();
  sub->add_option("--data", args->data_paths,
                  "projection data file(s) or directories, as for tomo local")
      ->required();
  sub->add_option("--method", args->method,
                  "automatic (opposing rays when the scan has them, else sharpness), "
                  "opposing-rays or sharpness")
      ->capture_default_str();
  sub->add_option("--radius", args->search_radius,
                  "columns searched either side of the detector centre (0: a quarter of them)")
      ->capture_default_str();
  sub->add_option("--row", args->row, "detector row to use (default: the middle row)");
  sub->add_option("--device", args->device, "cpu or cuda:N (default: the first device)");
  commands.push_back({sub, [args] { return RunCor(*args); }});
}

}  // namespace tomo::cli
