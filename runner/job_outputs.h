// Writes a finished job's volume in every requested output format into its result
// directory and describes each file for the Job record (ResultFile: name, format, size,
// CRC-32). The one place where OutputFormat values meet core/io's writers; tomod's workers
// and `tomo local` (through ExecuteJob) both call it, so both produce the same files.
//
// Files per format (docs/outputs.md):
//   RAW_FLOAT32      volume.raw and volume.json (its sidecar): two results of this format
//   NIFTI            volume.nii          NIFTI_GZ  volume.nii.gz      METAIMAGE  volume.mha
//   DICOM_CT_SERIES  volume_dicom.tar: volume_dicom/CT00001.dcm ... (one file per slice) in
//                    an uncompressed tar: one result, one checksum, one Fetch, and `tar xf`
//                    or `tomo fetch --format dicom` gives the directory of .dcm files
//   PNG_PREVIEW      preview_axial.png, preview_coronal.png, preview_sagittal.png
// Each file is written under a temporary name, fsynced and renamed (core/io/durable_file.h):
// a result name that exists is a whole file. volume.raw's bytes are the volume's float32
// values as they are in memory and its CRC-32 is Crc32OfBuffer of them: tomod's early
// fetch (job_manager.h) streams them from memory on that promise. The DICOM slices are written to a scratch
// folder inside output_dir, which is removed once they are in the tar.
//
// The water attenuation of the DICOM series' Hounsfield scale is settings' (the JobSpec's)
// when set, else metadata's (the DICOM-CT-PD input's).
//
//   TOMO_ASSIGN_OR_RETURN(std::vector<pb::ResultFile> results,
//       WriteJobOutputs(volume, job.request.volume, job.outputs, job.output_settings,
//                       metadata, output_dir));
//
// Errors: INVALID_ARGUMENT for an unknown format or a DICOM series with no water
// attenuation from either source (naming output_options.water_attenuation_per_mm); the
// writers' errors (INVALID_ARGUMENT for a volume that does not match its geometry or has
// non-finite values, INTERNAL or the errno's code naming the file that cannot be written).
// output_dir must exist. Thread-safe for different output_dirs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/io/acquisition_metadata.h"
#include "runner/job_spec.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> WriteJobOutputs(
    const core::Array3D& volume, const core::VolumeGeometry& geometry,
    const std::vector<tomoserve::v1::OutputFormat>& formats, const OutputSettings& settings,
    const core::AcquisitionMetadata& metadata, const std::string& output_dir);

// The names WriteJobOutputs gives the files of one format, in the order it returns them.
std::vector<std::string> OutputFileNames(tomoserve::v1::OutputFormat format);

// Name of the folder inside volume_dicom.tar ("volume_dicom").
inline constexpr char kDicomSeriesFolder[] = "volume_dicom";

}  // namespace tomo::server
