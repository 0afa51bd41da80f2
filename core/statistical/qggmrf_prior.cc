#include "core/statistical/qggmrf_prior.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tomo::core::statistical {

NeighbourOffset NeighbourOffsetOf(int k) {
  const int raster = k < 13 ? k : k + 1;  // skip the centre (raster index 13)
  return {raster / 9 - 1, (raster / 3) % 3 - 1, raster % 3 - 1};
}

std::array<double, 26> DefaultNeighbourWeights(const Vec3& voxel_size_mm) {
  std::array<double, 26> weights{};
  double sum = 0;
  for (int k = 0; k < 26; ++k) {
    const NeighbourOffset o = NeighbourOffsetOf(k);
    const double distance = std::sqrt(std::pow(o.dx * voxel_size_mm.x, 2) +
                                      std::pow(o.dy * voxel_size_mm.y, 2) +
                                      std::pow(o.dz * voxel_size_mm.z, 2));
    weights[static_cast<size_t>(k)] = 1.0 / distance;
    sum += 1.0 / distance;
  }
  for (double& w : weights) w /= sum;
  return weights;
}

QggmrfPrior DefaultQggmrfPrior(const VolumeGeometry& volume) {
  QggmrfPrior prior;
  prior.neighbour_weights = DefaultNeighbourWeights(volume.voxel_size_mm());
  return prior;
}

absl::Status ValidateQggmrfPrior(const QggmrfPrior& prior) {
  if (!(prior.p >= 1 && prior.p <= 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior.p: ", prior.p, " must be in [1, 2] (convex potential)"));
  }
  if (!(prior.q >= 1 && prior.q <= prior.p)) {
    return absl::InvalidArgumentError(absl::StrCat("prior.q: ", prior.q, " must be in [1, p = ",
                                                   prior.p, "] (convex potential)"));
  }
  if (!(std::isfinite(prior.c) && prior.c > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior.c: ", prior.c, " must be a finite value > 0"));
  }
  if (!(std::isfinite(prior.sigma) && prior.sigma > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior.sigma: ", prior.sigma, " must be a finite value > 0 (per mm)"));
  }
  double sum = 0;
  for (int k = 0; k < 26; ++k) {
    const double w = prior.neighbour_weights[static_cast<size_t>(k)];
    if (!(std::isfinite(w) && w >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prior.neighbour_weights[", k, "]: ", w, " must be a finite value >= 0"));
    }
    const double opposite = prior.neighbour_weights[static_cast<size_t>(25 - k)];
    if (w != opposite) {
      const NeighbourOffset o = NeighbourOffsetOf(k);
      return absl::InvalidArgumentError(absl::StrCat(
          "prior.neighbour_weights[", k, "]: ", w, " (offset dz, dy, dx = ", o.dz, ", ", o.dy,
          ", ", o.dx, ") must equal the weight of the opposite offset, neighbour_weights[",
          25 - k, "] = ", opposite));
    }
    sum += w;
  }
  if (!(sum > 0)) {
    return absl::InvalidArgumentError(
        "prior.neighbour_weights: all 26 are zero; at least one must be > 0");
  }
  return absl::OkStatus();
}

QggmrfCoefficientsT<double> QggmrfCoefficients(const QggmrfPrior& prior) {
  QggmrfCoefficientsT<double> k;
  k.p = prior.p;
  k.q = prior.q;
  k.inv_c_sigma = 1.0 / (prior.c * prior.sigma);
  k.inv_p_sigma_p = 1.0 / (prior.p * std::pow(prior.sigma, prior.p));
  // For p < 2 rho'(d) / d grows without bound as d -> 0: the surrogate's curvature is taken
  // at |d| >= 1e-6 c sigma (a millionth of the transition), which keeps it finite.
  k.min_difference = prior.p < 2 ? 1e-6 * prior.c * prior.sigma : 0.0;
  return k;
}

}  // namespace tomo::core::statistical
