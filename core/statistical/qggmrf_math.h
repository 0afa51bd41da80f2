// The q-generalized Gaussian MRF potential and its quadratic surrogate as inline functions
// shared by the CPU reference and the CUDA kernels (Real = double on the CPU, float on the
// device). QggmrfPrior (core/statistical/qggmrf_prior.h) documents the model.
//
//   rho(d) = |d|^p / (p sigma^p) / (1 + |d / (c sigma)|^(p - q))
//
// The surrogate is the symmetric bound: for a potential whose rho'(d) / d does not grow
// with |d| (true for 1 <= q <= p <= 2),
//   rho(d) <= rho(d0) + rho'(d0) / (2 d0) (d^2 - d0^2)   for every d,
// with equality at d = +-d0, so that minimising the quadratic in one voxel never raises the
// cost. SurrogateCurvature returns rho'(d0) / (2 d0):
//   |d0|^(p - 2) (p + q g) / (2 p sigma^p (1 + g)^2),  g = |d0 / (c sigma)|^(p - q).
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define TOMO_QG_HD __host__ __device__ __forceinline__
#else
#define TOMO_QG_HD inline
#endif

namespace tomo::core::statistical {

template <typename Real>
struct QggmrfCoefficientsT {
  Real p, q;
  Real inv_c_sigma;      // 1 / (c sigma)
  Real inv_p_sigma_p;    // 1 / (p sigma^p)
  Real min_difference;   // |d0| is raised to this for p < 2, where rho'(d)/d has no limit at 0
};

template <typename Real>
TOMO_QG_HD Real QggmrfPotential(const QggmrfCoefficientsT<Real>& k, Real d) {
  const Real a = fabs(d);
  if (a == Real(0)) return Real(0);
  const Real g = pow(a * k.inv_c_sigma, k.p - k.q);
  return pow(a, k.p) * k.inv_p_sigma_p / (Real(1) + g);
}

template <typename Real>
TOMO_QG_HD Real QggmrfSurrogateCurvature(const QggmrfCoefficientsT<Real>& k, Real d0) {
  Real a = fabs(d0);
  if (a < k.min_difference) a = k.min_difference;
  const Real g = pow(a * k.inv_c_sigma, k.p - k.q);
  const Real one_g = Real(1) + g;
  // p == 2: |d0|^0 == 1 even at d0 == 0 (pow(0, 0) is 1).
  return pow(a, k.p - Real(2)) * (k.p + k.q * g) * k.inv_p_sigma_p / (Real(2) * one_g * one_g);
}

}  // namespace tomo::core::statistical
