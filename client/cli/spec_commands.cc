// The commands that help write a JobSpec: spec (a complete, commented example for a
// geometry and an algorithm) and validate (a spec file checked by the daemon's own
// validation, without a daemon and without the data unless given).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"
#include "client/cli/commented_spec.h"
#include "client/cli/output_commands.h"
#include "client/cli/spec_examples.h"
#include "client/job_spec_json.h"
#include "client/job_spec_sizes.h"
#include "nlohmann/json.hpp"
#include "runner/job_spec.h"

namespace tomo::cli {
namespace {

namespace v1 = ::tomoserve::v1;

// "256 x 256 x 1 voxels of 0.5 x 0.5 x 0.5 mm (256.0 KiB as float32)"
std::string DescribeVolume(const v1::Volume& volume) {
  const uint64_t z = volume.size().z() == 0 ? 1 : volume.size().z();
  const uint64_t bytes = uint64_t{volume.size().x()} * volume.size().y() * z * 4;
  return absl::StrFormat("%d x %d x %d voxels of %g x %g x %g mm (%s as float32)",
                         volume.size().x(), volume.size().y(), z, volume.voxel_size_mm().x(),
                         volume.voxel_size_mm().y(),
                         volume.voxel_size_mm().z() == 0 ? volume.voxel_size_mm().x()
                                                         : volume.voxel_size_mm().z(),
                         HumanBytes(bytes));
}

// "360 views x 1 row x 366 columns x 4 bytes = 527040 bytes (514.7 KiB)"
std::string DescribeInput(const v1::JobSpec& spec) {
  const std::optional<client::ProjectionDims> dims = client::ProjectionShape(spec.geometry());
  const uint64_t value_bytes = client::RawValueBytes(spec.input().encoding());
  if (!dims || value_bytes == 0 || !spec.input().files().empty()) {
    return absl::StrCat(HumanBytes(spec.input().size_bytes()), " in ",
                        spec.input().files_size(), " file(s)");
  }
  return absl::StrFormat("%d views x %d %s x %d columns x %d bytes = %d bytes (%s)",
                         dims->views, dims->rows, dims->rows == 1 ? "row" : "rows",
                         dims->columns, value_bytes,
                         spec.input().size_bytes(), HumanBytes(spec.input().size_bytes()));
}

// ----------------------------------------------------------------------------- spec

struct SpecArgs {
  ExampleSpecOptions example;
  std::vector<std::string> outputs;
};

int RunSpec(const GlobalOptions& global, const SpecArgs& args) {
  absl::StatusOr<v1::JobSpec> spec = ExampleSpec(args.example);
  if (!spec.ok()) return Fail("spec: usage", spec.status().message(), kExitUsage);
  if (!args.outputs.empty()) {
    spec->clear_outputs();
    for (const std::string& name : args.outputs) {
      absl::StatusOr<v1::OutputFormat> format = ParseOutputFormatName(name);
      if (!format.ok()) return Fail("spec: usage", format.status().message(), kExitUsage);
      spec->add_outputs(*format);
    }
  }
  // The daemon's validation says whether the algorithm takes the geometry. A DICOM-CT-PD
  // spec lists its files only once --data gives them: checked here with stand-ins.
  {
    v1::JobSpec checked = *spec;
    if (checked.geometry().has_from_input_files()) {
      for (int64_t i = 0; i < args.example.views; ++i) {
        v1::InputFile* file = checked.mutable_input()->add_files();
        file->set_name(absl::StrCat("view", i, ".dcm"));
        file->set_size_bytes(1);
      }
      checked.mutable_input()->set_size_bytes(static_cast<uint64_t>(args.example.views));
    }
    absl::StatusOr<server::ValidatedJob> valid =
        server::ValidateJobSpec(checked, server::ServerLimits{});
    if (!valid.ok()) {
      return Fail("spec",
                  absl::StrCat("--algorithm ", args.example.algorithm, " with --geometry ",
                               args.example.geometry, ": ", valid.status().message()),
                  kExitUsage);
    }
  }
  if (global.json) {
    std::cout << client::JobSpecToJson(*spec);
    JsonPrinted();
    return kExitOk;
  }
  std::vector<std::string> header = {
      absl::StrCat("JobSpec: ", args.example.geometry, " geometry, ", args.example.algorithm,
                   " (tomo spec --geometry ", args.example.geometry, " --algorithm ",
                   args.example.algorithm, " --size ", args.example.size, " --views ",
                   args.example.views, " --voxel-size ", args.example.voxel_size_mm, ")"),
      absl::StrCat("geometry: ", DescribeGeometry(spec->geometry())),
      absl::StrCat("volume:   ", DescribeVolume(spec->volume()), " per output"),
  };
  if (args.example.geometry == "dicom-ct-pd") {
    header.push_back("input:    the DICOM-CT-PD files given with --data (one view each); "
                     "input.files and input.size_bytes are filled from them");
  } else {
    header.push_back(absl::StrCat("input:    float32 little-endian, view-row-column: ",
                                  DescribeInput(*spec)));
  }
  header.push_back("Check it with: tomo validate FILE [--data FILE...]; run it with tomo "
                   "submit --spec FILE --data FILE (or tomo local). Comments are allowed.");
  std::cout << CommentedSpecJson(*spec, header);
  return kExitOk;
}

// ----------------------------------------------------------------------------- validate

struct ValidateArgs {
  std::string spec_path;
  std::vector<std::string> data_paths;
};

int RunValidate(const GlobalOptions& global, const ValidateArgs& args) {
  const std::string what = "validate";
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.spec_path);
  if (!spec.ok()) return Fail(what, spec.status());
  std::vector<std::string> data_paths = args.data_paths;
  if (spec->geometry().has_from_input_files() && data_paths.empty()) {
    return Fail("validate: usage",
                absl::StrCat(args.spec_path, ": geometry.from_input_files: the geometry is in "
                             "the DICOM-CT-PD files; give them with --data"),
                kExitUsage);
  }
  if (!data_paths.empty()) {
    if (absl::Status sized = PrepareInputFiles(&data_paths, &*spec); !sized.ok()) {
      return Fail(what, absl::StrCat(args.spec_path, ": ", sized.message()),
                  ExitCodeFor(sized));
    }
  } else {
    client::FillImpliedInputSize(&*spec);
  }
  absl::StatusOr<server::ValidatedJob> job =
      server::ValidateJobSpec(*spec, server::ServerLimits{});
  if (!job.ok()) {
    return Fail(what, absl::StrCat(args.spec_path, ": ", job.status().message()),
                ExitCodeFor(job.status()));
  }
  if (global.json) {
    JsonPrinted();
    nlohmann::ordered_json out;
    out["valid"] = true;
    out["file"] = args.spec_path;
    out["inputBytes"] = job->input_bytes;
    out["spec"] = nlohmann::ordered_json::parse(client::JobSpecToJson(*spec));
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << args.spec_path << ": valid\n"
            << "geometry   " << DescribeGeometry(spec->geometry()) << "\n"
            << "volume     " << DescribeVolume(spec->volume()) << "\n"
            << "algorithm  " << DescribeAlgorithm(spec->algorithm()) << "\n"
            << "input      "
            << DescribeInput(*spec)
            << "\n";
  std::cout.flush();
  return kExitOk;
}

}  // namespace

void AddSpecCommands(CLI::App& app, const GlobalOptions& global,
                     std::vector<Command>& commands) {
  const GlobalOptions* g = &global;
  {
    auto args = std::make_shared<SpecArgs>();
    CLI::App* sub = app.add_subcommand(
        "spec", "Print a complete, commented example JobSpec for a geometry and an algorithm, "
                "with the sizes it implies (input.size_bytes filled in); --json: plain JSON.");
    sub->add_option("--geometry", args->example.geometry,
                    absl::StrCat("one of ", absl::StrJoin(ExampleGeometryNames(), ", ")))
        ->required();
    sub->add_option("--algorithm", args->example.algorithm,
                    absl::StrCat("one of ", absl::StrJoin(ExampleAlgorithmNames(), ", ")))
        ->capture_default_str();
    sub->add_option("--size", args->example.size, "grid side in voxels")->capture_default_str();
    sub->add_option("--views", args->example.views,
                    "views (helical: per turn; radon-3d: directions)")
        ->capture_default_str();
    sub->add_option("--voxel-size", args->example.voxel_size_mm, "voxel size in mm")
        ->capture_default_str();
    sub->add_option("--iterations", args->example.iterations,
                    "iterations of an iterative algorithm (default: the example's)");
    sub->add_option("--output", args->outputs,
                    absl::StrCat("output formats (repeat or comma list): ",
                                 OutputFormatNamesText(), "; default raw"))
        ->delimiter(',');
    commands.push_back({sub, [g, args] { return RunSpec(*g, *args); }});
  }
  {
    auto args = std::make_shared<ValidateArgs>();
    CLI::App* sub = app.add_subcommand(
        "validate", "Check a JobSpec file with tomod's own validation (and its default "
                    "limits; tomo info shows a server's), without a daemon. Sizes that "
                    "follow from the geometry are filled in; with --data the files' sizes "
                    "are checked too. Exits 5 when the spec is refused. --json: {\"valid\", "
                    "\"file\", \"inputBytes\", \"spec\" (its sizes filled in)}.");
    sub->add_option("spec", args->spec_path, "JobSpec JSON file")->required();
    sub->add_option("--data", args->data_paths,
                    "projection data file(s) or directories, as submit takes them");
    commands.push_back({sub, [g, args] { return RunValidate(*g, *args); }});
  }
}

}  // namespace tomo::cli
