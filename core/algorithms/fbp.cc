#include "core/algorithms/fbp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;

// Each view's share of the angular integral. Angles are sorted modulo 2 pi and each view
// gets half the gap to either neighbour. When the views go round the whole circle the
// first and last are neighbours across 0; otherwise an end view has one neighbour and
// takes that whole gap (as if the spacing continued), so a uniform half scan gets equal
// weights. The weights are then scaled to sum to pi, the range of distinct directions:
// a full circle sees every line twice and so counts each view half.
//
// "Covers the circle" is decided by the gap across 0: when it is no wider than twice
// the widest gap between consecutive views, the set is treated as cyclic.
std::vector<double> AngularWeights(const std::vector<double>& angles_rad) {
  const size_t count = angles_rad.size();
  std::vector<double> weights(count, count > 0 ? kPi / static_cast<double>(count) : 0.0);
  if (count < 2) return weights;

  std::vector<double> wrapped(count);
  for (size_t i = 0; i < count; ++i) {
    double a = std::fmod(angles_rad[i], kTwoPi);
    if (a < 0) a += kTwoPi;
    wrapped[i] = a;
  }
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return wrapped[a] < wrapped[b]; });

  // gaps[i]: from sorted view i to sorted view i + 1; the last is the gap across 0.
  std::vector<double> gaps(count);
  double widest_inner_gap = 0;
  for (size_t i = 0; i + 1 < count; ++i) {
    gaps[i] = wrapped[order[i + 1]] - wrapped[order[i]];
    widest_inner_gap = std::max(widest_inner_gap, gaps[i]);
  }
  gaps[count - 1] = wrapped[order[0]] + kTwoPi - wrapped[order[count - 1]];
  const bool cyclic = gaps[count - 1] <= 2.0 * widest_inner_gap;

  std::vector<double> sorted_weights(count);
  for (size_t i = 0; i < count; ++i) {
    double before = i > 0 ? gaps[i - 1] : gaps[count - 1];
    double after = gaps[i];
    if (!cyclic) {
      if (i == 0) before = after;
      if (i == count - 1) after = before;
    }
    sorted_weights[i] = 0.5 * (before + after);
  }
  const double total = std::accumulate(sorted_weights.begin(), sorted_weights.end(), 0.0);
  if (!(total > 0)) return weights;  // all angles equal: keep the even split
  for (size_t i = 0; i < count; ++i) weights[order[i]] = sorted_weights[i] * kPi / total;
  return weights;
}

}  // namespace

absl::StatusOr<Array3D> Fbp(const ParallelGeometry2D& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FbpOptions& options, Backend& backend,
                            const RunContext& context) {
  if (volume.size().z != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "size.z: ", volume.size().z, " is not supported; 2D parallel-beam FBP needs 1"));
  }
  const Dims3 expected = geometry.projection_dims();
  if (projections.dims() != expected) {
    const Dims3& actual = projections.dims();
    return absl::InvalidArgumentError(
        absl::StrCat("projections: dims (", actual.d0, ", ", actual.d1, ", ", actual.d2,
                     ") do not match the geometry's (", expected.d0, ", ", expected.d1, ", ",
                     expected.d2, ") (views, rows, detectors)"));
  }
  TOMO_ASSIGN_OR_RETURN(
      RampFilter filter,
      RampFilter::Create(options.filter, geometry.num_detectors(), geometry.detector_spacing_mm()));

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / filter"));
  context.Report({0.0, "filter"});
  Array3D filtered = projections.Clone();
  TOMO_RETURN_IF_ERROR(backend.FilterRows(filter, filtered));

  // Joseph's transpose gives each pixel, per view, weights that sum to dx dy / ds (pixel
  // area over detector spacing) instead of 1, so ds / (dx dy) turns it into the
  // interpolating back projection that the FBP integral needs.
  const double ds = geometry.detector_spacing_mm();
  const double pixel_area = volume.voxel_size_mm().x * volume.voxel_size_mm().y;
  const std::vector<double> weights = AngularWeights(geometry.angles_rad());
  const int64_t row_length = filtered.dims().d1 * filtered.dims().d2;
  for (int64_t v = 0; v < filtered.dims().d0; ++v) {
    const float scale = static_cast<float>(weights[static_cast<size_t>(v)] * ds / pixel_area);
    float* row = filtered.data() + v * row_length;
    for (int64_t i = 0; i < row_length; ++i) row[i] *= scale;
  }

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / back projection"));
  context.Report({0.5, "back projection"});
  Array3D image(volume.dims());
  TOMO_RETURN_IF_ERROR(backend.BackProject(geometry, volume, filtered, image));
  context.Report({1.0, "back projection"});
  return image;
}

}  // namespace tomo::core
