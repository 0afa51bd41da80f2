#include "core/statistical/pwls_cost.h"

#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core::statistical {

double QggmrfPriorValue(const QggmrfPrior& prior, const Size3& size, const float* values,
                        int64_t stride_x, int64_t stride_y, int64_t stride_z) {
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(prior);
  double sum = 0;
  for (int64_t iz = 0; iz < size.z; ++iz) {
    for (int64_t iy = 0; iy < size.y; ++iy) {
      for (int64_t ix = 0; ix < size.x; ++ix) {
        const double center = values[ix * stride_x + iy * stride_y + iz * stride_z];
        // Neighbours 13..25 are the offsets after the centre in raster order: each pair once.
        for (int n = 13; n < 26; ++n) {
          const double b = prior.neighbour_weights[static_cast<size_t>(n)];
          if (b == 0) continue;
          const NeighbourOffset o = NeighbourOffsetOf(n);
          const int64_t jx = ix + o.dx, jy = iy + o.dy, jz = iz + o.dz;
          if (jx < 0 || jx >= size.x || jy < 0 || jy >= size.y || jz < 0 || jz >= size.z) {
            continue;
          }
          const double other = values[jx * stride_x + jy * stride_y + jz * stride_z];
          sum += b * QggmrfPotential(k, center - other);
        }
      }
    }
  }
  return sum;
}

absl::StatusOr<PwlsCost> EvaluatePwlsCost(const SeparableFootprintProjector& projector,
                                          const Array3D& line_integrals, const Array3D& weights,
                                          const Array3D& volume, const QggmrfPrior& prior) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("line_integrals", line_integrals.dims(),
                                      projector.projection_dims(), "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("weights", weights.dims(), projector.projection_dims(),
                                      "(views, rows, columns)"));
  TOMO_ASSIGN_OR_RETURN(Array3D ax, projector.Forward(volume));
  PwlsCost cost;
  for (int64_t i = 0; i < ax.size(); ++i) {
    const double e = static_cast<double>(ax.data()[i]) - line_integrals.data()[i];
    cost.data_term += 0.5 * weights.data()[i] * e * e;
  }
  const Size3& n = projector.volume().size();
  cost.prior_term = QggmrfPriorValue(prior, n, volume.data(), 1, n.x, n.x * n.y);
  return cost;
}

}  // namespace tomo::core::statistical
