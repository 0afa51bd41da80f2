// Joseph's 2D parallel-beam projector and its exact transpose on the CPU (backend.h,
// parallel_2d_joseph.h): the reference of kJosephExactTranspose2D.
#include "core/operators/cpu/cpu_parallel_2d_projector.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/operators/parallel_2d_joseph.h"

namespace tomo::core {
namespace {

// A view's Joseph parameters (parallel_2d_joseph.h) plus the reciprocal that the gather
// in BackProject solves for detector indices with, instead of dividing per pixel.
// ForwardProject and BackProject call Position() with the same arguments, so their
// interpolation weights are the same numbers and BackProject is A's exact transpose.
struct JosephView : JosephViewParameters {
  double detectors_per_position = 0;
};

inline double Position(const JosephView& view, int64_t k, int64_t line) {
  return view.per_detector * static_cast<double>(k) +
         (view.per_line * static_cast<double>(line) + view.offset);
}

// Weight of pixel `pixel` in the interpolation at `position`: the linear-interpolation
// "hat", 1 - frac for floor(position) and frac for the next pixel. Both directions call
// this with the same arguments, so A and A^T hold bitwise the same weights.
inline double InterpolationWeight(double position, int64_t pixel) {
  return 1.0 - std::abs(position - static_cast<double>(pixel));
}

// floor() for the small values Joseph's loops convert (positions within the image,
// detector indices clamped to the detector), without the libm call that baseline x86-64
// makes of std::floor. Equal to std::floor for every such value.
inline int64_t FloorToInt(double value) {
  const int64_t truncated = static_cast<int64_t>(value);
  return value < static_cast<double>(truncated) ? truncated - 1 : truncated;
}

std::vector<JosephView> MakeCpuJosephViews(const ParallelGeometry2D& geometry,
                                           const VolumeGeometry& volume) {
  std::vector<JosephView> views;
  for (const JosephViewParameters& parameters : MakeJosephViews(geometry, volume)) {
    views.push_back(JosephView{parameters, 1.0 / parameters.per_detector});
  }
  return views;
}

}  // namespace

absl::Status CpuParallel2DForward(const ParallelGeometry2D& geometry,
                                  const VolumeGeometry& volume_geometry, const Array3D& volume,
                                  Array3D& projections, int threads) {
  TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  const std::vector<JosephView> views = MakeCpuJosephViews(geometry, volume_geometry);
  const int64_t nx = volume_geometry.size().x;
  const int64_t ny = volume_geometry.size().y;
  const int64_t num_detectors = geometry.num_detectors();
  const float* image = volume.data();
  float* output = projections.data();

  ParallelFor(
      geometry.num_views(),
      [&](int64_t view_begin, int64_t view_end) {
        for (int64_t v = view_begin; v < view_end; ++v) {
          const JosephView& view = views[static_cast<size_t>(v)];
          const int64_t num_lines = view.step_rows ? ny : nx;
          const int64_t num_along = view.step_rows ? nx : ny;
          // Pixel (line, i) lies at image[line * line_stride + i * along_stride].
          const int64_t line_stride = view.step_rows ? nx : 1;
          const int64_t along_stride = view.step_rows ? 1 : nx;
          for (int64_t k = 0; k < num_detectors; ++k) {
            double sum = 0;
            for (int64_t line = 0; line < num_lines; ++line) {
              const double position = Position(view, k, line);
              // Both neighbours outside the image: nothing to add (and no overflow below).
              if (!(position > -1.0 && position < static_cast<double>(num_along))) continue;
              const int64_t i0 = FloorToInt(position);
              const float* row = image + line * line_stride;
              if (i0 >= 0) sum += InterpolationWeight(position, i0) * row[i0 * along_stride];
              if (i0 + 1 < num_along) {
                sum += InterpolationWeight(position, i0 + 1) * row[(i0 + 1) * along_stride];
              }
            }
            output[v * num_detectors + k] = static_cast<float>(sum * view.path_length);
          }
        }
      },
      threads);
  return absl::OkStatus();
}

absl::Status CpuParallel2DBack(const ParallelGeometry2D& geometry,
                               const VolumeGeometry& volume_geometry, const Array3D& projections,
                               Array3D& volume, int threads) {
  TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  const std::vector<JosephView> views = MakeCpuJosephViews(geometry, volume_geometry);
  const int64_t nx = volume_geometry.size().x;
  const int64_t ny = volume_geometry.size().y;
  const int64_t num_detectors = geometry.num_detectors();
  const float* input = projections.data();
  float* image = volume.data();

  // The forward pass reads pixel `along` of line `line` from ray k when floor(position) is
  // `along` or `along - 1`: position in [along - 1, along + 1), where the weight is the
  // hat InterpolationWeight(position, along). position is affine in k, so those k form a
  // range, found by solving for k. Rounding can only drop a k at the range's ends, whose
  // weight there is zero to within rounding.
  auto gather = [num_detectors](const JosephView& view, const float* row, int64_t line,
                                int64_t along) {
    const double at_line = view.per_line * static_cast<double>(line) + view.offset;
    const double k_a = (static_cast<double>(along - 1) - at_line) * view.detectors_per_position;
    const double k_b = (static_cast<double>(along + 1) - at_line) * view.detectors_per_position;
    // Clamped to the detector before converting, so that far-off rays cannot overflow.
    const double last = static_cast<double>(num_detectors - 1);
    const int64_t k_first = -FloorToInt(-std::clamp(std::min(k_a, k_b), 0.0, last + 1.0));
    const int64_t k_last = FloorToInt(std::clamp(std::max(k_a, k_b), -1.0, last));
    double sum = 0;
    for (int64_t k = k_first; k <= k_last; ++k) {
      // max(0, .): a k at the range's very end may sit a rounding error outside it.
      sum += std::max(0.0, InterpolationWeight(Position(view, k, line), along)) * row[k];
    }
    return sum * view.path_length;
  };

  ParallelFor(
      ny,
      [&](int64_t y_begin, int64_t y_end) {
        // One image row at a time, all views, the inner loop along the row: the view's
        // projection row stays in cache while the row's pixels read it. Each pixel still
        // sums its views in view order, so results do not depend on the thread count.
        std::vector<double> row_sums(static_cast<size_t>(nx));
        for (int64_t iy = y_begin; iy < y_end; ++iy) {
          std::fill(row_sums.begin(), row_sums.end(), 0.0);
          for (size_t v = 0; v < views.size(); ++v) {
            const JosephView& view = views[v];
            const float* row = input + static_cast<int64_t>(v) * num_detectors;
            if (view.step_rows) {
              for (int64_t ix = 0; ix < nx; ++ix) {
                row_sums[static_cast<size_t>(ix)] += gather(view, row, iy, ix);
              }
            } else {
              for (int64_t ix = 0; ix < nx; ++ix) {
                row_sums[static_cast<size_t>(ix)] += gather(view, row, ix, iy);
              }
            }
          }
          for (int64_t ix = 0; ix < nx; ++ix) {
            image[iy * nx + ix] = static_cast<float>(row_sums[static_cast<size_t>(ix)]);
          }
        }
      },
      threads);
  return absl::OkStatus();
}

}  // namespace tomo::core
