// The JobSpec's algorithm.icd (PWLS with the q-GGMRF prior by ICD, docs/statistical.md):
// validation into core::IcdAlgorithmOptions, and the photon statistics a DICOM-CT-PD input
// brings for its weights. Called by ValidateJobSpec (job_spec.h) and RequestForInput
// (job_input.h).
//
// Errors are INVALID_ARGUMENT naming the proto path, its value and the allowed range, e.g.
//   "algorithm.icd.prior.q: 2.5 is out of range [1, p = 2]"
#pragma once

#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// Defaults: iterations 0 -> 4, the prior's as QggmrfPriorOptions says (DefaultQggmrfPrior
// of the volume), start FDK. Geometry: cone, helical (with ICD_START_ZERO), vectors with
// BEAM_KIND_CONE, or from_input_files; flat detectors. Weights: flat_field_photons, or a
// DICOM-CT-PD input. Iterations above --max_iterations are ValidateJobSpec's check.
absl::StatusOr<core::IcdAlgorithmOptions> ValidateStatisticalIcd(
    const tomoserve::v1::StatisticalIcdOptions& given, const tomoserve::v1::JobSpec& spec,
    const core::VolumeGeometry& volume);

// For an icd job without flat_field_photons: its weights' I0 from the input's photon
// statistics (views, 1, n) (DICOM-CT-PD). Any other algorithm, or no statistics: unchanged.
void UsePhotonStatistics(const core::Array3D& photon_statistics,
                         core::AlgorithmOptions& algorithm);

}  // namespace tomo::server
