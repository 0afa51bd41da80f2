// QggmrfPrior: the q-generalized Gaussian Markov random field prior of PWLS reconstruction,
// over the 26-neighbourhood:
//   R(x) = sum over unordered neighbour pairs {j, k} of b_jk rho(x_j - x_k),
//   rho(d) = |d|^p / (p sigma^p) / (1 + |d / (c sigma)|^(p - q))
// (core/statistical/qggmrf_math.h). Small differences (|d| << c sigma) are penalised as
// |d|^p, large ones (edges) as |d|^q; sigma (per mm, the unit of the volume) scales the
// penalty against the data term and c sets the transition.
//
// Defaults: p = 2 and q = 1.2 as commonly used for CT; c = 0.1 and sigma = 1e-3 /mm (the
// transition c sigma = 1e-4 /mm is about 5 HU at 70 keV, where water is 0.02 /mm);
// neighbour weights proportional to 1 / distance in mm between voxel centres, normalised
// to sum to 1 over the 26 neighbours (DefaultNeighbourWeights). Pairs outside the volume
// are left out (free boundary). The strength of the prior against the data term goes as
// 1 / sigma^2 against the weights (photon counts): sigma is to be chosen for the dose;
// for 2e4 photons per unattenuated pixel, sigma = 3e-4 /mm with c = 1 gave the smallest
// error against the phantom in tests/core/statistical/icd_cpu_test.cc.
//
//   QggmrfPrior prior = DefaultQggmrfPrior(volume);
//   prior.sigma = 0.004;
//   TOMO_RETURN_IF_ERROR(ValidateQggmrfPrior(prior));
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "core/geometry/vec3.h"
#include "core/geometry/volume_geometry.h"
#include "core/statistical/qggmrf_math.h"

namespace tomo::core::statistical {

// Neighbour k in [0, 26) is the offset (dz, dy, dx) in {-1, 0, 1}^3, the centre left out,
// in raster order with dx fastest: k = 0 is (-1, -1, -1), k = 12 is (0, 0, -1), k = 13 is
// (0, 0, 1), k = 25 is (1, 1, 1). Neighbour 25 - k is the opposite offset.
struct NeighbourOffset {
  int dz, dy, dx;
};
NeighbourOffset NeighbourOffsetOf(int k);

struct QggmrfPrior {
  double p = 2.0;
  double q = 1.2;
  double c = 0.1;
  double sigma = 1e-3;  // per mm
  std::array<double, 26> neighbour_weights{};  // b for each offset; DefaultNeighbourWeights
};

// 1 / distance (mm) for voxels of that size, normalised to sum to 1.
std::array<double, 26> DefaultNeighbourWeights(const Vec3& voxel_size_mm);
QggmrfPrior DefaultQggmrfPrior(const VolumeGeometry& volume);

// INVALID_ARGUMENT naming the field ("prior.q"), its value and the allowed range when:
// p is not in [1, 2]; q is not in [1, p]; c or sigma is not a finite value > 0; a
// neighbour weight is negative or not finite; weights of opposite offsets differ (the
// prior is a sum over unordered pairs); all weights are zero.
absl::Status ValidateQggmrfPrior(const QggmrfPrior& prior);

QggmrfCoefficientsT<double> QggmrfCoefficients(const QggmrfPrior& prior);

}  // namespace tomo::core::statistical
