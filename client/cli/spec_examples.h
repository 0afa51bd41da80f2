// Example JobSpecs for `tomo spec`: a complete spec for each geometry kind and algorithm,
// sized for an N^3 (2D: N^2) grid of the given voxel size that the detector sees whole,
// with input.size_bytes filled in from the geometry.
//
//   geometry    parallel-2d parallel-3d fan-2d cone helical vectors radon-3d dicom-ct-pd
//   algorithm   fbp sirt sart os-sart cgls art icd
//
// The geometries are those of `tomo phantom` (phantom_cases.h) where it has them;
// parallel-3d has a detector of voxel-sized pixels over 180 degrees; helical is the cone's
// source and detector distances with a shorter detector (a quarter of N rows, at least 8)
// moving by half its height at the axis per turn, --views a turn, over the grid's height plus
// the detector's; vectors is the circular cone written out view by view; dicom-ct-pd takes
// its geometry from the files (input.files and input.size_bytes then come from --data).
// Whether the algorithm takes the geometry is not checked here: `tomo spec` runs the
// daemon's validation on the result.
//
// INVALID_ARGUMENT naming --geometry or --algorithm (with the allowed names) or the size
// options out of range.
//
//   TOMO_ASSIGN_OR_RETURN(JobSpec spec, ExampleSpec({"cone", "sirt", 128, 360, 0.5, 0}));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

struct ExampleSpecOptions {
  std::string geometry = "parallel-2d";
  std::string algorithm = "fbp";
  int64_t size = 256;          // voxels per side
  int64_t views = 360;         // views (helical: per turn; radon-3d: directions)
  double voxel_size_mm = 0.5;
  uint32_t iterations = 0;     // 0: the algorithm's example count
};

const std::vector<std::string>& ExampleGeometryNames();
const std::vector<std::string>& ExampleAlgorithmNames();

absl::StatusOr<tomoserve::v1::JobSpec> ExampleSpec(const ExampleSpecOptions& options);

}  // namespace tomo::cli
