#include "client/cli/output_commands.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/progress_bar.h"
#include "client/tomo_client.h"
#include "core/io/png_preview.h"
#include "core/io/raw_io.h"
#include "core/io/tar_archive.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace tomo::cli {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;

constexpr std::pair<const char*, v1::OutputFormat> kFormatNames[] = {
    {"raw", v1::OUTPUT_FORMAT_RAW_FLOAT32},    {"nifti", v1::OUTPUT_FORMAT_NIFTI},
    {"nifti-gz", v1::OUTPUT_FORMAT_NIFTI_GZ},  {"mha", v1::OUTPUT_FORMAT_METAIMAGE},
    {"dicom", v1::OUTPUT_FORMAT_DICOM_CT_SERIES}, {"png", v1::OUTPUT_FORMAT_PNG_PREVIEW}};

// The numbers of a JSON array field of the sidecar.
absl::StatusOr<std::vector<double>> Numbers(const google::protobuf::Struct& sidecar,
                                            const std::string& key, size_t count,
                                            const std::string& path) {
  const auto it = sidecar.fields().find(key);
  if (it == sidecar.fields().end() || !it->second.has_list_value() ||
      static_cast<size_t>(it->second.list_value().values_size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": \"", key, "\" must be an array of ", count, " numbers"));
  }
  std::vector<double> numbers;
  for (const google::protobuf::Value& value : it->second.list_value().values()) {
    if (!value.has_number_value()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" holds a non-number"));
    }
    numbers.push_back(value.number_value());
  }
  return numbers;
}

std::string StringField(const google::protobuf::Struct& sidecar, const std::string& key) {
  const auto it = sidecar.fields().find(key);
  return it != sidecar.fields().end() && it->second.has_string_value() ? it->second.string_value()
                                                                        : std::string();
}


absl::StatusOr<std::optional<core::DisplayWindow>> ParseWindowOption(const std::string& text) {
  if (text.empty()) return std::optional<core::DisplayWindow>();
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  core::DisplayWindow window;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &window.lower) ||
      !absl::SimpleAtod(parts[1], &window.upper) || !(window.upper > window.lower)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window ", text, ": expected LOWER,UPPER with UPPER > LOWER (1/mm)"));
  }
  return std::optional<core::DisplayWindow>(window);
}

int PreviewRaw(const GlobalOptions& global, const std::string& raw_path, const fs::path& out_dir,
               const std::optional<core::DisplayWindow>& window) {
  const std::string what = absl::StrCat("preview ", raw_path);
  const std::string sidecar = fs::path(raw_path).replace_extension(".json").string();
  absl::StatusOr<core::VolumeGeometry> geometry = GeometryFromSidecar(sidecar);
  if (!geometry.ok()) return Fail(what, geometry.status());
  absl::StatusOr<core::Array3D> volume = core::ReadRawFloat32(raw_path, geometry->dims());
  if (!volume.ok()) return Fail(what, volume.status());
  std::error_code error;
  fs::create_directories(out_dir, error);
  absl::StatusOr<std::vector<std::string>> names =
      core::WritePngPreviews(out_dir.string(), *volume, *geometry, window);
  if (!names.ok()) return Fail(what, names.status());
  for (const std::string& name : *names) PrintPath(global, (out_dir / name).string());
  std::cout.flush();
  return kExitOk;
}

struct PreviewArgs {
  std::string target;  // job id or volume.raw
  std::string out;
  std::string window;
};

int RunPreview(const GlobalOptions& global, const PreviewArgs& args) {
  absl::StatusOr<std::optional<core::DisplayWindow>> window = ParseWindowOption(args.window);
  if (!window.ok()) return Fail("preview: usage", window.status().message(), kExitUsage);
  std::error_code error;
  if (fs::is_regular_file(args.target, error)) {
    const fs::path out = args.out.empty() ? fs::path(args.target).parent_path() : fs::path(args.out);
    return PreviewRaw(global, args.target, out.empty() ? fs::path(".") : out, *window);
  }
  // A job id.
  const std::string what = absl::StrCat("preview ", args.target);
  client::TomoClient client(global.server, ClientOptionsFor(global));
  absl::StatusOr<v1::Job> job = client.GetJob(args.target);
  if (!job.ok()) return FailRpc(global, what, job.status());
  const fs::path out = args.out.empty() ? fs::path(".") / args.target : fs::path(args.out);
  fs::create_directories(out, error);
  std::vector<std::string> pngs, raw;
  for (const v1::ResultFile& result : job->results()) {
    if (result.format() == v1::OUTPUT_FORMAT_PNG_PREVIEW) pngs.push_back(result.name());
    if (result.name() == "volume.raw" || result.name() == "volume.json") raw.push_back(result.name());
  }
  const bool use_pngs = !pngs.empty() && !window->has_value();
  if (!use_pngs && raw.size() != 2) {
    return Fail(what,
                absl::StrCat("job ", args.target, " has no PNG previews", window->has_value() ? " to use with --window" : "",
                             " and no volume.raw with volume.json to render; submit with "
                             "outputs OUTPUT_FORMAT_PNG_PREVIEW or OUTPUT_FORMAT_RAW_FLOAT32"),
                kExitNotFound);
  }
  for (const std::string& name : use_pngs ? pngs : raw) {
    ProgressBar bar(ProgressWanted(global));
    absl::StatusOr<v1::ResultFile> file = client.Fetch(
        args.target, name, (out / name).string(), /*resume=*/true,
        [&](uint64_t done, uint64_t total) {
          bar.UpdateBytes(done, total, absl::StrCat("fetching ", name));
        });
    bar.Finish();
    if (!file.ok()) return Fail(absl::StrCat(what, "/", name), file.status());
  }
  if (!use_pngs) return PreviewRaw(global, (out / "volume.raw").string(), out, *window);
  for (const std::string& name : pngs) PrintPath(global, (out / name).string());
  std::cout.flush();
  return kExitOk;
}

}  // namespace

absl::Status ApplyOutputFlags(const OutputFlags& flags, v1::JobSpec* spec) {
  if (!flags.formats.empty()) {
    spec->clear_outputs();
    for (const std::string& name : flags.formats) {
      absl::StatusOr<v1::OutputFormat> format = ParseOutputFormatName(name);
      if (!format.ok()) return format.status();
      spec->add_outputs(*format);
    }
  }
  if (flags.water_attenuation_per_mm != 0) {
    if (!std::isfinite(flags.water_attenuation_per_mm) || flags.water_attenuation_per_mm < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--water-attenuation ", flags.water_attenuation_per_mm,
          ": expected mu of water in 1/mm, a finite value > 0 (about 0.019 at 70 keV)"));
    }
    spec->mutable_output_options()->set_water_attenuation_per_mm(flags.water_attenuation_per_mm);
  }
  return absl::OkStatus();
}

void AddOutputFlags(CLI::App* command, OutputFlags* flags) {
  command
      ->add_option("--format", flags->formats,
                   absl::StrCat("output formats, replacing the spec's outputs (repeat or comma "
                                "list): ",
                                OutputFormatNamesText()))
      ->delimiter(',');
  command->add_option("--water-attenuation", flags->water_attenuation_per_mm,
                      "mu of water at the scan's effective energy, 1/mm (about 0.019 at 70 "
                      "keV): the HU scale of a DICOM series (output_options."
                      "water_attenuation_per_mm)");
}

absl::StatusOr<core::VolumeGeometry> GeometryFromSidecar(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the sidecar ", path));
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  google::protobuf::Struct sidecar;
  if (!google::protobuf::util::JsonStringToMessage(json, &sidecar).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  if (StringField(sidecar, "element_type") != "float32" ||
      StringField(sidecar, "byte_order") != "little_endian") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": only element_type float32, byte_order little_endian is read"));
  }
  absl::StatusOr<std::vector<double>> size = Numbers(sidecar, "size", 3, path);
  if (!size.ok()) return size.status();
  absl::StatusOr<std::vector<double>> voxel = Numbers(sidecar, "voxel_size_mm", 3, path);
  if (!voxel.ok()) return voxel.status();
  absl::StatusOr<std::vector<double>> centre = Numbers(sidecar, "center_mm", 3, path);
  if (!centre.ok()) return centre.status();
  for (double side : *size) {
    if (!(side >= 1 && side <= core::VolumeGeometry::kMaxSide) || side != std::floor(side)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": size ", side, " is not in [1, ",
                                                     core::VolumeGeometry::kMaxSide, "]"));
    }
  }
  return core::VolumeGeometry::Create(
      {static_cast<int64_t>((*size)[0]), static_cast<int64_t>((*size)[1]),
       static_cast<int64_t>((*size)[2])},
      {(*voxel)[0], (*voxel)[1], (*voxel)[2]}, {(*centre)[0], (*centre)[1], (*centre)[2]});
}

absl::StatusOr<v1::OutputFormat> ParseOutputFormatName(absl::string_view name) {
  for (const auto& [text, format] : kFormatNames) {
    if (name == text) return format;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("format \"", name, "\" is not one of ", OutputFormatNamesText()));
}

std::string OutputFormatNamesText() {
  std::vector<std::string> names;
  for (const auto& entry : kFormatNames) names.push_back(entry.first);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::string> UnpackDicomSeries(const std::string& tar_path,
                                              const std::string& directory) {
  absl::StatusOr<std::vector<std::string>> paths = core::ExtractTar(tar_path, directory);
  if (!paths.ok()) return paths.status();
  if (paths->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(tar_path, ": holds no DICOM file"));
  }
  std::error_code error;
  fs::remove(tar_path, error);
  return fs::path(paths->front()).parent_path().string();
}

void AddOutputCommands(CLI::App& app, const GlobalOptions& global,
                       std::vector<Command>& commands) {
  const GlobalOptions* g = &global;
  auto args = std::make_shared<PreviewArgs>();
  CLI::App* sub = app.add_subcommand(
      "preview",
      "PNG previews of the three central slices (axial, coronal, sagittal) of a job's volume "
      "or of a local volume.raw with its volume.json sidecar.");
  sub->add_option("target", args->target, "job id, or a volume.raw file")->required();
  sub->add_option("--out", args->out,
                  "directory for the PNGs (default: the file's directory, or ./<job id>/)");
  sub->add_option("--window", args->window,
                  "LOWER,UPPER in 1/mm shown black to white (default: 1st..99th percentile)");
  commands.push_back({sub, [g, args] { return RunPreview(*g, *args); }});
}

}  // namespace tomo::cli
