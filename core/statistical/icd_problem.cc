#include "core/statistical/icd_problem.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core::statistical {
namespace {

std::vector<float> ToViewColumnRow(const Array3D& a) {
  const Dims3& d = a.dims();
  std::vector<float> out(static_cast<size_t>(a.size()));
  ParallelFor(d.d0, [&](int64_t v0, int64_t v1) {
    for (int64_t v = v0; v < v1; ++v) {
      for (int64_t r = 0; r < d.d1; ++r) {
        for (int64_t c = 0; c < d.d2; ++c) {
          out[static_cast<size_t>(ViewColumnRowIndex(v, r, c, d.d1, d.d2))] = a.at(v, r, c);
        }
      }
    }
  });
  return out;
}

// The first offending element, searched on ParallelFor threads (each chunk's first, then
// the smallest of them).
absl::Status CheckFinite(const char* name, const Array3D& a, bool non_negative) {
  std::atomic<int64_t> first_bad{a.size()};
  ParallelFor(a.size(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float value = a.data()[i];
      if (!std::isfinite(value) || (non_negative && value < 0)) {
        int64_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
        return;
      }
    }
  });
  const int64_t i = first_bad.load();
  if (i == a.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, ": element ", i, " is ", a.data()[i],
                                                 "; must be finite",
                                                 non_negative ? " and >= 0" : ""));
}

double SumOfSquares(const std::vector<float>& values) {
  const int64_t count = static_cast<int64_t>(values.size());
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(DefaultThreadCount(), count / 65536));
  std::vector<double> sums(static_cast<size_t>(parts), 0.0);
  ParallelFor(
      parts,
      [&](int64_t p0, int64_t p1) {
        for (int64_t part = p0; part < p1; ++part) {
          double sum = 0;
          for (int64_t i = count * part / parts; i < count * (part + 1) / parts; ++i) {
            sum += static_cast<double>(values[static_cast<size_t>(i)]) * values[static_cast<size_t>(i)];
          }
          sums[static_cast<size_t>(part)] = sum;
        }
      },
      static_cast<int>(parts));
  double total = 0;
  for (double sum : sums) total += sum;
  return total;
}

}  // namespace

absl::StatusOr<IcdProblem> PrepareIcdProblem(const SeparableFootprintProjector& projector,
                                             const Array3D& line_integrals,
                                             const Array3D& weights,
                                             const Array3D* start_volume,
                                             const IcdOptions& options, ResidualStart residual) {
  TOMO_RETURN_IF_ERROR(ValidateIcdOptions(options));
  const Dims3 projection_dims = projector.projection_dims();
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("line_integrals", line_integrals.dims(), projection_dims,
                                      "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(
      CheckDimsMatch("weights", weights.dims(), projection_dims, "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(CheckFinite("line_integrals", line_integrals, false));
  TOMO_RETURN_IF_ERROR(CheckFinite("weights", weights, true));
  const VolumeGeometry& geometry = projector.volume();
  if (start_volume != nullptr) {
    TOMO_RETURN_IF_ERROR(
        CheckDimsMatch("start_volume", start_volume->dims(), geometry.dims(), "(z, y, x)"));
    TOMO_RETURN_IF_ERROR(CheckFinite("start_volume", *start_volume, false));
  }

  IcdProblem problem;
  problem.size = geometry.size();
  problem.views = projection_dims.d0;
  problem.rows = projection_dims.d1;
  problem.columns = projection_dims.d2;
  const Size3& n = problem.size;
  problem.volume.assign(static_cast<size_t>(geometry.voxel_count()), 0.0f);
  Array3D start_clipped;
  if (start_volume != nullptr) {
    start_clipped = Array3D::Uninitialized(start_volume->dims());
    ParallelFor(start_clipped.size(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        start_clipped.data()[i] = std::max(start_volume->data()[i], 0.0f);
      }
    });
    ParallelFor(n.y, [&](int64_t y0, int64_t y1) {
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t iz = 0; iz < n.z; ++iz) {
          for (int64_t ix = 0; ix < n.x; ++ix) {
            problem.volume[static_cast<size_t>((iy * n.x + ix) * n.z + iz)] =
                start_clipped.at(iz, iy, ix);
          }
        }
      }
    });
  }
  problem.weights = ToViewColumnRow(weights);
  problem.line_integrals = ToViewColumnRow(line_integrals);
  problem.line_integrals_norm2 = SumOfSquares(problem.line_integrals);
  if (residual == ResidualStart::kCompute) {
    if (start_volume != nullptr) {
      TOMO_ASSIGN_OR_RETURN(Array3D ax, projector.Forward(start_clipped));
      problem.residual = ToViewColumnRow(ax);
    } else {
      problem.residual.assign(problem.line_integrals.size(), 0.0f);
    }
    for (size_t i = 0; i < problem.residual.size(); ++i) {
      problem.residual[i] -= problem.line_integrals[i];
    }
  }
  problem.column_order.resize(static_cast<size_t>(n.x * n.y));
  std::iota(problem.column_order.begin(), problem.column_order.end(), 0);
  std::mt19937_64 random(options.column_order_seed);
  std::shuffle(problem.column_order.begin(), problem.column_order.end(), random);
  return problem;
}

Array3D VolumeFromZFastest(const std::vector<float>& volume, const Size3& n) {
  Array3D out = Array3D::Uninitialized({n.z, n.y, n.x});
  ParallelFor(n.y, [&](int64_t y0, int64_t y1) {
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        const float* column = volume.data() + (iy * n.x + ix) * n.z;
        for (int64_t iz = 0; iz < n.z; ++iz) out.at(iz, iy, ix) = column[iz];
      }
    }
  });
  return out;
}

double HalfWeightedSquares(const std::vector<float>& residual, const std::vector<float>& weights) {
  double sum = 0;
  for (size_t i = 0; i < residual.size(); ++i) {
    sum += 0.5 * static_cast<double>(weights[i]) * residual[i] * residual[i];
  }
  return sum;
}

}  // namespace tomo::core::statistical
