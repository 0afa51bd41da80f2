// The options of the "icd" registry entry (statistical_icd.h): PWLS with the q-GGMRF prior
// by ICD, the statistical weights' source and the start. A plain struct, so that
// reconstruction.h's AlgorithmOptions can hold it without the algorithm.
#pragma once

#include <memory>

#include "core/data/array3d.h"
#include "core/statistical/icd_options.h"

namespace tomo::core {

struct IcdAlgorithmOptions {
  statistical::IcdOptions icd;
  // The statistical weights are the expected detected photons, w = I0 exp(-y), y the line
  // integrals and I0 the photons an unattenuated pixel detects (statistical_weights.h: the
  // same as flat_field_counts * I / I_flat for intensities with their flat field).
  // photon_statistics (views, 1, n), DICOM-CT-PD's: I0 per view and column when n is the
  // detector's columns, else its first value for the whole view. Empty or null:
  // flat_field_photons for every pixel (> 0).
  std::shared_ptr<const Array3D> photon_statistics;
  double flat_field_photons = 0;
  // Start from the FDK (Ram-Lak) of the same projections, clamped at 0; false: zeros.
  bool start_from_fdk = true;
};

}  // namespace tomo::core
