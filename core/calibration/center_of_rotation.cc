#include "core/calibration/center_of_rotation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/algorithms/fbp_for_geometry.h"
#include "core/base/status_macros.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kHistogramBins = 256;
constexpr int64_t kMaxSharpnessImageSide = 256;

// Pairs (i, j) of views whose angles differ by pi (mod 2 pi) within a tenth of the
// smallest angular step (1e-4 rad at most), each view in one pair at most.
std::vector<std::pair<int64_t, int64_t>> OpposingPairs(const std::vector<double>& angles) {
  double step = std::numeric_limits<double>::infinity();
  std::vector<double> sorted = angles;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] > sorted[i - 1]) step = std::min(step, sorted[i] - sorted[i - 1]);
  }
  const double tolerance = std::isfinite(step) ? std::min(1e-4, 0.1 * step) : 1e-4;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<bool> used(angles.size(), false);
  for (size_t i = 0; i < angles.size(); ++i) {
    if (used[i]) continue;
    for (size_t j = i + 1; j < angles.size(); ++j) {
      if (used[j]) continue;
      double d = std::fmod(angles[j] - angles[i], 2 * kPi);
      if (d < 0) d += 2 * kPi;
      if (std::abs(d - kPi) < tolerance) {
        pairs.emplace_back(static_cast<int64_t>(i), static_cast<int64_t>(j));
        used[i] = used[j] = true;
        break;
      }
    }
  }
  return pairs;
}

// Mean squared difference between view i and view j mirrored about column c, over the
// columns whose mirror lies on the detector; infinity when fewer than a quarter do.
double MirrorCost(const Array3D& sinogram, const std::vector<std::pair<int64_t, int64_t>>& pairs,
                  double c) {
  const int64_t n = sinogram.dims().d2;
  double sum = 0;
  int64_t count = 0;
  for (const auto& [i, j] : pairs) {
    const float* a = sinogram.data() + i * n;
    const float* b = sinogram.data() + j * n;
    for (int64_t k = 0; k < n; ++k) {
      const double x = 2 * c - static_cast<double>(k);
      if (x < 0 || x > static_cast<double>(n - 1)) continue;
      const int64_t x0 = std::min<int64_t>(static_cast<int64_t>(x), n - 2);
      const double w = x - static_cast<double>(x0);
      const double mirrored = n == 1 ? b[0] : (1 - w) * b[x0] + w * b[x0 + 1];
      const double d = a[k] - mirrored;
      sum += d * d;
      ++count;
    }
  }
  const int64_t needed = std::max<int64_t>(1, static_cast<int64_t>(pairs.size()) * n / 4);
  return count >= needed ? sum / static_cast<double>(count)
                         : std::numeric_limits<double>::infinity();
}

// A fan beam's views sorted by angle in [0, 2 pi), for finding the views on either side of
// a conjugate ray's angle.
struct SortedViews {
  std::vector<double> angle;  // ascending, in [0, 2 pi)
  std::vector<int64_t> view;
  double largest_gap = 0;     // between neighbours, around the circle
};

SortedViews SortViews(const std::vector<double>& angles) {
  std::vector<std::pair<double, int64_t>> order;
  for (size_t i = 0; i < angles.size(); ++i) {
    double a = std::fmod(angles[i], 2 * kPi);
    if (a < 0) a += 2 * kPi;
    order.emplace_back(a, static_cast<int64_t>(i));
  }
  std::sort(order.begin(), order.end());
  SortedViews sorted;
  for (const auto& [a, v] : order) {
    sorted.angle.push_back(a);
    sorted.view.push_back(v);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const double next = i + 1 < order.size() ? order[i + 1].first : order[0].first + 2 * kPi;
    sorted.largest_gap = std::max(sorted.largest_gap, next - order[i].first);
  }
  return sorted;
}

// Mean squared difference between each reading of a fan-beam full scan and its conjugate
// ray's: the ray at source angle beta and fan angle gamma is the ray at beta + pi + 2 gamma,
// -gamma, measured in reverse; with the axis on column c the fan angle of column k is
// atan((k - c) pitch / D) (flat) or (k - c) pitch / D (an arc about the source), D the
// source-detector distance, and -gamma is column 2c - k. The conjugate reading is
// interpolated between the two views and columns around it.
double ConjugateRayCost(const Array3D& sinogram, const CorScan& scan, const SortedViews& sorted,
                        double c) {
  const int64_t n = scan.columns;
  const double distance = scan.source_origin_mm + scan.origin_detector_mm;
  const int64_t views = static_cast<int64_t>(sorted.angle.size());
  double sum = 0;
  int64_t count = 0;
  for (int64_t v = 0; v < views; ++v) {
    const float* row = sinogram.data() + v * n;
    for (int64_t k = 0; k < n; ++k) {
      const double mirrored = 2 * c - static_cast<double>(k);
      if (mirrored < 0 || mirrored > static_cast<double>(n - 1)) continue;
      const double u = (static_cast<double>(k) - c) * scan.column_spacing_mm;
      const double gamma =
          scan.shape == DetectorShape::kCylindrical ? u / distance : std::atan(u / distance);
      double beta = std::fmod(scan.angles_rad[static_cast<size_t>(v)] + kPi + 2 * gamma, 2 * kPi);
      if (beta < 0) beta += 2 * kPi;
      // The sorted views around beta (wrapping around the circle).
      const size_t upper = static_cast<size_t>(
          std::upper_bound(sorted.angle.begin(), sorted.angle.end(), beta) - sorted.angle.begin());
      const size_t after = upper % sorted.angle.size();
      const size_t before = (upper + sorted.angle.size() - 1) % sorted.angle.size();
      double a0 = sorted.angle[before], a1 = sorted.angle[after];
      if (a1 <= a0) a1 += 2 * kPi;
      double b = beta;
      if (b < a0) b += 2 * kPi;
      const double w = a1 > a0 ? std::clamp((b - a0) / (a1 - a0), 0.0, 1.0) : 0.0;
      const int64_t x0 = std::min<int64_t>(static_cast<int64_t>(mirrored), n - 2);
      const double t = mirrored - static_cast<double>(x0);
      auto reading = [&](size_t sorted_index) {
        const float* r = sinogram.data() + sorted.view[sorted_index] * n;
        return (1 - t) * r[x0] + t * r[x0 + 1];
      };
      const double conjugate = (1 - w) * reading(before) + w * reading(after);
      const double d = row[k] - conjugate;
      sum += d * d;
      ++count;
    }
  }
  return count >= views * n / 4 ? sum / static_cast<double>(count)
                                : std::numeric_limits<double>::infinity();
}

// Golden-section minimum of f on [a, b] to within tolerance.
template <typename F>
absl::StatusOr<double> GoldenSection(F&& f, double a, double b, double tolerance) {
  const double ratio = (std::sqrt(5.0) - 1) / 2;
  double x1 = b - ratio * (b - a), x2 = a + ratio * (b - a);
  TOMO_ASSIGN_OR_RETURN(double f1, f(x1));
  TOMO_ASSIGN_OR_RETURN(double f2, f(x2));
  while (b - a > tolerance) {
    if (f1 <= f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - ratio * (b - a);
      TOMO_ASSIGN_OR_RETURN(f1, f(x1));
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + ratio * (b - a);
      TOMO_ASSIGN_OR_RETURN(f2, f(x2));
    }
  }
  return 0.5 * (a + b);
}

// The best candidate of a grid [lo, hi] in steps of `step`.
template <typename F>
absl::StatusOr<double> GridMinimum(F&& f, double lo, double hi, double step) {
  double best = lo, best_cost = std::numeric_limits<double>::infinity();
  for (double c = lo; c <= hi + 1e-9; c += step) {
    TOMO_ASSIGN_OR_RETURN(double cost, f(c));
    if (cost < best_cost) {
      best_cost = cost;
      best = c;
    }
  }
  return best;
}

struct SharpnessProblem {
  const Array3D& sinogram;
  const CorScan& scan;
  VolumeGeometry volume;
  Backend& backend;
  const RunContext& context;
  double lower = 0, upper = 0;  // the histogram's range
};

absl::StatusOr<Array3D> ReconstructWithCenter(const SharpnessProblem& problem, double column) {
  const CorScan& scan = problem.scan;
  DetectorLayout detector{1, scan.columns, 1.0, scan.column_spacing_mm,
                          OffsetForCenterColumn(column, scan.columns, scan.column_spacing_mm), 0};
  absl::StatusOr<VectorGeometry> geometry;
  if (scan.source_origin_mm > 0) {
    FanConeOptions fan;
    fan.detector = detector;
    fan.shape = scan.shape;
    fan.source_origin_mm = scan.source_origin_mm;
    fan.origin_detector_mm = scan.origin_detector_mm;
    fan.angles_rad = scan.angles_rad;
    geometry = MakeFan2D(fan);
  } else {
    geometry = MakeParallel2D(detector, scan.angles_rad);
  }
  if (!geometry.ok()) return geometry.status();
  TOMO_RETURN_IF_ERROR(problem.context.CheckCancelled("centre of rotation"));
  return FbpForGeometry(Geometry(std::move(*geometry)), problem.volume, problem.sinogram,
                        FilterOptions{}, problem.backend, RunContext{});
}

// The histogram entropy of the disc inscribed in the image.
double Entropy(const Array3D& image, double lower, double upper) {
  const int64_t n = image.dims().d2;
  std::vector<double> counts(kHistogramBins, 0.0);
  double total = 0;
  const double radius = 0.5 * static_cast<double>(n) - 1;
  for (int64_t y = 0; y < n; ++y) {
    for (int64_t x = 0; x < n; ++x) {
      const double dx = static_cast<double>(x) - 0.5 * static_cast<double>(n - 1);
      const double dy = static_cast<double>(y) - 0.5 * static_cast<double>(n - 1);
      if (dx * dx + dy * dy > radius * radius) continue;
      const double t = (image.at(0, y, x) - lower) / (upper - lower);
      const int bin = std::clamp(static_cast<int>(t * kHistogramBins), 0, kHistogramBins - 1);
      counts[bin] += 1;
      total += 1;
    }
  }
  double entropy = 0;
  for (double c : counts) {
    if (c > 0) entropy -= (c / total) * std::log(c / total);
  }
  return entropy;
}

}  // namespace

double OffsetForCenterColumn(double column, int64_t columns, double column_spacing_mm) {
  return (0.5 * static_cast<double>(columns - 1) - column) * column_spacing_mm;
}

double CenterColumnForOffset(double offset_u_mm, int64_t columns, double column_spacing_mm) {
  return 0.5 * static_cast<double>(columns - 1) - offset_u_mm / column_spacing_mm;
}

std::string CorEstimate::Summary(int64_t columns, double column_spacing_mm) const {
  return absl::StrFormat(
      "centre of rotation: column %.2f estimated by %s (detector offset_u %.4g mm)", column,
      method == CorMethod::kOpposingViews
          ? absl::StrCat("opposing rays (", view_pairs, " views compared)")
          : std::string("sharpness (histogram entropy of the slice)"),
      OffsetForCenterColumn(column, columns, column_spacing_mm));
}

absl::StatusOr<CorEstimate> EstimateCenterOfRotation(const Array3D& sinogram,
                                                     const CorScan& scan,
                                                     const CorOptions& options, Backend& backend,
                                                     const RunContext& context) {
  const Dims3& d = sinogram.dims();
  if (d.d1 != 1 || d.d2 != scan.columns || d.d0 != static_cast<int64_t>(scan.angles_rad.size()) ||
      scan.columns < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "centre of rotation: the sinogram is ", d.d0, " x ", d.d1, " x ", d.d2,
        " (views, rows, columns); one row of ", scan.columns, " columns (at least 2) and ",
        scan.angles_rad.size(), " views expected"));
  }
  if (!(scan.column_spacing_mm > 0) || !std::isfinite(scan.column_spacing_mm)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "centre of rotation: column_spacing_mm ", scan.column_spacing_mm, " is not > 0"));
  }
  const double middle = 0.5 * static_cast<double>(scan.columns - 1);
  const double radius = options.search_radius_columns > 0
                            ? options.search_radius_columns
                            : 0.25 * static_cast<double>(scan.columns);
  if (!std::isfinite(radius) || radius >= middle + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "centre of rotation: search_radius_columns ", radius, " is out of range (0, ",
        middle + 1, "); the centre must stay on the detector"));
  }
  const bool parallel = !(scan.source_origin_mm > 0);
  const std::vector<std::pair<int64_t, int64_t>> pairs =
      parallel ? OpposingPairs(scan.angles_rad) : std::vector<std::pair<int64_t, int64_t>>();
  // A fan beam's conjugate rays need the whole circle, sampled without gaps wider than
  // twice the mean step.
  const SortedViews sorted = parallel ? SortedViews() : SortViews(scan.angles_rad);
  const bool full_fan = !parallel && scan.angles_rad.size() >= 8 &&
                        sorted.largest_gap <= 2 * (2 * kPi / static_cast<double>(
                                                                 scan.angles_rad.size()));
  CorMethod method = options.method;
  if (method == CorMethod::kAutomatic) {
    method = !pairs.empty() || full_fan ? CorMethod::kOpposingViews : CorMethod::kSharpness;
  }
  CorEstimate estimate;
  estimate.method = method;
  if (method == CorMethod::kOpposingViews && !parallel) {
    if (!full_fan) {
      return absl::InvalidArgumentError(absl::StrCat(
          "centre of rotation: a fan beam's opposing rays need a full 360-degree scan without "
          "gaps (the largest gap between views is ",
          sorted.largest_gap * 180 / kPi, " degrees); use the sharpness search"));
    }
    estimate.view_pairs = static_cast<int64_t>(scan.angles_rad.size());
    auto cost = [&](double c) -> absl::StatusOr<double> {
      return ConjugateRayCost(sinogram, scan, sorted, c);
    };
    TOMO_ASSIGN_OR_RETURN(double coarse, GridMinimum(cost, middle - radius, middle + radius, 0.25));
    TOMO_ASSIGN_OR_RETURN(estimate.column, GoldenSection(cost, coarse - 0.25, coarse + 0.25, 1e-3));
    return estimate;
  }
  if (method == CorMethod::kOpposingViews) {
    if (pairs.empty()) {
      return absl::InvalidArgumentError(
          "centre of rotation: no two views are 180 degrees apart (a 360-degree scan, or 180 "
          "degrees with both end views, has them); use the sharpness search");
    }
    estimate.view_pairs = static_cast<int64_t>(pairs.size());
    auto cost = [&](double c) -> absl::StatusOr<double> { return MirrorCost(sinogram, pairs, c); };
    TOMO_ASSIGN_OR_RETURN(double coarse, GridMinimum(cost, middle - radius, middle + radius, 0.25));
    TOMO_ASSIGN_OR_RETURN(estimate.column, GoldenSection(cost, coarse - 0.25, coarse + 0.25, 1e-3));
    return estimate;
  }
  // Sharpness: an image of at most 256 x 256 pixels covering the field of view.
  const double magnification =
      parallel ? 1.0 : (scan.source_origin_mm + scan.origin_detector_mm) / scan.source_origin_mm;
  const double field_mm = static_cast<double>(scan.columns) * scan.column_spacing_mm / magnification;
  const int64_t side = std::min<int64_t>(scan.columns, kMaxSharpnessImageSide);
  const double pixel_mm = field_mm / static_cast<double>(side);
  TOMO_ASSIGN_OR_RETURN(VolumeGeometry volume,
                        VolumeGeometry::Create({side, side, 1}, {pixel_mm, pixel_mm, 1.0}, {}));
  SharpnessProblem problem{sinogram, scan, volume, backend, context};
  TOMO_ASSIGN_OR_RETURN(Array3D centred, ReconstructWithCenter(problem, middle));
  const auto [low, high] = std::minmax_element(centred.data(), centred.data() + centred.size());
  const double span = std::max(1e-12, static_cast<double>(*high - *low));
  problem.lower = *low - 0.5 * span;
  problem.upper = *high + 0.5 * span;
  auto cost = [&](double c) -> absl::StatusOr<double> {
    TOMO_ASSIGN_OR_RETURN(Array3D image, ReconstructWithCenter(problem, c));
    return Entropy(image, problem.lower, problem.upper);
  };
  TOMO_ASSIGN_OR_RETURN(double coarse, GridMinimum(cost, std::ceil(middle - radius),
                                                   std::floor(middle + radius), 1.0));
  TOMO_ASSIGN_OR_RETURN(double fine, GridMinimum(cost, coarse - 0.75, coarse + 0.75, 0.25));
  TOMO_ASSIGN_OR_RETURN(estimate.column, GridMinimum(cost, fine - 0.2, fine + 0.2, 0.05));
  return estimate;
}

}  // namespace tomo::core
