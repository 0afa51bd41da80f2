// `tomo phantom --geometry dicom-ct-pd`: demo data in the format of real CT scanners. Writes
// a DICOM-CT-PD scan of the 3D Shepp-Logan phantom (core/io/dicom_ct_pd_writer.h; one file
// per view in <out_dir>/scan/), the phantom rasterised on the grid (truth.raw, float32
// z-y-x) and job.json (geometry from the input files, FBP/FDK), for
//   tomo submit --spec <out_dir>/job.json --data <out_dir>/scan --wait
// The scanner is third-generation: a cylindrical detector, source-origin 3 N voxels,
// source-detector 4 N voxels, enough columns and rows to see the whole N^3 grid, views over
// 360 degrees at z = 0 (circular, so FDK applies).
//
// Returns the paths written (the scan directory, job.json, truth.raw); INVALID_ARGUMENT for
// a size below 8 or views below 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tomo::cli {

absl::StatusOr<std::vector<std::string>> WriteDicomCtPdPhantom(const std::string& out_dir,
                                                               int64_t size, int64_t views,
                                                               double voxel_size_mm);

}  // namespace tomo::cli
