// The output formats on the command line: their names (`--format nifti`), `tomo preview`,
// and the unpacking of a fetched DICOM series (issue 5, data out).
//
//   raw       OUTPUT_FORMAT_RAW_FLOAT32      volume.raw + volume.json
//   nifti     OUTPUT_FORMAT_NIFTI            volume.nii
//   nifti-gz  OUTPUT_FORMAT_NIFTI_GZ         volume.nii.gz
//   mha       OUTPUT_FORMAT_METAIMAGE        volume.mha
//   dicom     OUTPUT_FORMAT_DICOM_CT_SERIES  volume_dicom.tar -> volume_dicom/CT00001.dcm ...
//   png       OUTPUT_FORMAT_PNG_PREVIEW      preview_{axial,coronal,sagittal}.png
//
//   tomo preview <job id | volume.raw> [--out DIR] [--window LOWER,UPPER]
//     a job: its PNG_PREVIEW results when it has them (and no --window is given), else its
//     volume.raw and volume.json fetched and rendered here; a local volume.raw: read with
//     the sidecar next to it (volume.json, as the RAW_FLOAT32 output writes it). Prints the
//     three PNG paths.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli/cli_common.h"
#include "core/geometry/volume_geometry.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

// "nifti-gz" -> OUTPUT_FORMAT_NIFTI_GZ; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<tomoserve::v1::OutputFormat> ParseOutputFormatName(absl::string_view name);
// "raw, nifti, nifti-gz, mha, dicom, png"
std::string OutputFormatNamesText();

// Unpacks a fetched volume_dicom.tar into directory (volume_dicom/CT00001.dcm ...), removes
// the tar and returns the folder holding the .dcm files.
absl::StatusOr<std::string> UnpackDicomSeries(const std::string& tar_path,
                                              const std::string& directory);

// The output flags of submit and local: --format (names, replacing spec.outputs when given)
// and --water-attenuation (mu of water in 1/mm, setting
// spec.output_options.water_attenuation_per_mm for the HU of a DICOM series; 0: keep the
// spec's). INVALID_ARGUMENT naming the flag for an unknown format or a value that is not
// finite and > 0.
struct OutputFlags {
  std::vector<std::string> formats;
  double water_attenuation_per_mm = 0;
};
absl::Status ApplyOutputFlags(const OutputFlags& flags, tomoserve::v1::JobSpec* spec);
void AddOutputFlags(CLI::App* command, OutputFlags* flags);

// The grid of a raw float32 volume from its JSON sidecar (core/io/raw_sidecar.h: the
// volume.json next to volume.raw): NOT_FOUND when it cannot be read, INVALID_ARGUMENT
// naming the path and what is wrong in it.
absl::StatusOr<core::VolumeGeometry> GeometryFromSidecar(const std::string& path);

void AddOutputCommands(CLI::App& app, const GlobalOptions& global,
                       std::vector<Command>& commands);

}  // namespace tomo::cli
