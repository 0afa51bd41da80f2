#include "core/algorithms/angular_weights.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;

}  // namespace

AngularShares ComputeAngularShares(const std::vector<double>& angles_rad) {
  const size_t count = angles_rad.size();
  AngularShares result;
  result.share_rad.assign(count, 0.0);
  result.position_rad.assign(count, 0.0);
  if (count == 0) return result;
  if (count == 1) {
    result.share_rad[0] = kPi;
    result.range_rad = kPi;
    result.position_rad[0] = 0.5 * kPi;
    return result;
  }

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

  // gaps[i]: from sorted view i to sorted view i + 1 (the last across 0).
  std::vector<double> gaps(count);
  for (size_t i = 0; i + 1 < count; ++i) gaps[i] = wrapped[order[i + 1]] - wrapped[order[i]];
  gaps[count - 1] = wrapped[order[0]] + kTwoPi - wrapped[order[count - 1]];
  // The widest gap (the last one on ties, so that an arc starting at 0 keeps its order) and
  // the next widest.
  size_t widest = count - 1;
  for (size_t i = 0; i < count; ++i) {
    if (gaps[i] > gaps[widest]) widest = i;
  }
  double second = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i != widest) second = std::max(second, gaps[i]);
  }
  result.cyclic = gaps[widest] <= 2.0 * second;

  // Walk the views in arc order: the first is the one right after the widest gap.
  for (size_t k = 0; k < count; ++k) {
    const size_t i = (widest + 1 + k) % count;  // sorted index
    double before = gaps[(i + count - 1) % count];
    double after = gaps[i];
    if (!result.cyclic) {
      if (k == 0) before = after;
      if (k == count - 1) after = before;
    }
    result.share_rad[order[i]] = 0.5 * (before + after);
  }
  if (!result.cyclic) {
    const size_t first = order[(widest + 1) % count];
    const double start = wrapped[first] - 0.5 * result.share_rad[first];
    for (size_t i = 0; i < count; ++i) {
      double position = wrapped[i] - start;
      while (position < 0) position += kTwoPi;
      while (position >= kTwoPi) position -= kTwoPi;
      result.position_rad[i] = position;
    }
  }
  result.range_rad = std::accumulate(result.share_rad.begin(), result.share_rad.end(), 0.0);
  return result;
}

std::vector<double> ParallelBeamWeights(const std::vector<double>& angles_rad) {
  const size_t count = angles_rad.size();
  std::vector<double> weights(count, count > 0 ? kPi / static_cast<double>(count) : 0.0);
  if (count < 2) return weights;
  const AngularShares shares = ComputeAngularShares(angles_rad);
  if (!(shares.range_rad > 0)) return weights;  // all angles equal: keep the even split
  for (size_t i = 0; i < count; ++i) weights[i] = shares.share_rad[i] * kPi / shares.range_rad;
  return weights;
}

}  // namespace tomo::core
