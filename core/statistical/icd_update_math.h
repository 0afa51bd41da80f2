// The one-voxel update of ICD (core/statistical/icd_options.h), shared by the CPU reference
// and the CUDA kernels: the minimiser over r >= 0 of
//   theta1 (r - x) + theta2 (r - x)^2 / 2 + sum_k b_k c_k (r - x_k)^2,
// c_k = QggmrfSurrogateCurvature(x - x_k), the data term exact (it is quadratic in r) and
// the prior replaced by its symmetric-bound surrogate at the current value x. Setting the
// derivative to zero:
//   r = (theta2 x - theta1 + sum 2 b_k c_k x_k) / (theta2 + sum 2 b_k c_k),
// then r = max(r, 0) (the constrained minimiser of a convex 1D quadratic).
#pragma once

#include "core/statistical/qggmrf_math.h"

namespace tomo::core::statistical {

// One neighbour's part of the surrogate: its curvature 2 b c(x - x_k) (the denominator's
// term; times x_k, the numerator's). Split out so that the device can sum the 26 terms
// across the lanes of a warp.
template <typename Real>
TOMO_QG_HD Real SurrogateNeighbourCurvature(Real x, Real neighbour_value, Real neighbour_weight,
                                            const QggmrfCoefficientsT<Real>& k) {
  return Real(2) * neighbour_weight * QggmrfSurrogateCurvature(k, x - neighbour_value);
}

// The clipped minimiser from the data term and the summed neighbour terms:
// prior_numerator = sum 2 b_k c_k x_k, prior_denominator = sum 2 b_k c_k.
template <typename Real>
TOMO_QG_HD Real SurrogateSolve(Real x, Real theta1, Real theta2, Real prior_numerator,
                               Real prior_denominator) {
  const Real numerator = theta2 * x - theta1 + prior_numerator;
  const Real denominator = theta2 + prior_denominator;
  const Real r = denominator > Real(0) ? numerator / denominator : x;
  return r > Real(0) ? r : Real(0);
}

// neighbour_values[n], neighbour_weights[n] for the 26 neighbours; weight 0 for those
// outside the volume (their value is then not read).
template <typename Real>
TOMO_QG_HD Real SurrogateVoxelUpdate(Real x, Real theta1, Real theta2,
                                     const Real* neighbour_values,
                                     const Real* neighbour_weights,
                                     const QggmrfCoefficientsT<Real>& k) {
  Real numerator = 0;
  Real denominator = 0;
  for (int n = 0; n < 26; ++n) {
    const Real b = neighbour_weights[n];
    if (b == Real(0)) continue;
    const Real other = neighbour_values[n];
    const Real curvature = SurrogateNeighbourCurvature(x, other, b, k);
    numerator += curvature * other;
    denominator += curvature;
  }
  return SurrogateSolve(x, theta1, theta2, numerator, denominator);
}

}  // namespace tomo::core::statistical
