// Angular quadrature weights for the analytic algorithms (Fbp, Fdk): how much of the
// angular integral each view stands for, for any set of view angles (uneven, unsorted,
// short scans, full circles).
//
// Angles are wrapped into [0, 2 pi) and sorted; each view gets half the gap to either
// neighbour. The set "covers the circle" (is cyclic) when its widest gap is no wider than
// twice the next widest: then the first and last views are neighbours across the widest
// gap too. Otherwise the scan is an arc that starts after the widest gap; an end view has one
// neighbour and takes that whole gap (as if the spacing continued), so the shares of a
// uniform arc of N views starting at a and spanning S (a + i S / N) are all S / N and sum
// to S.
//
//   AngularShares shares = ComputeAngularShares(angles);   // shares.range_rad: 2 pi or S
//   std::vector<double> w = ParallelBeamWeights(angles);   // sums to pi
#pragma once

#include <vector>

namespace tomo::core {

struct AngularShares {
  std::vector<double> share_rad;  // per view, in the given order
  bool cyclic = false;            // the views go round the whole circle
  double range_rad = 0;           // sum of the shares: 2 pi when cyclic, else the arc
  // Position of each view along the arc, from the start of the arc (half a share before
  // the first view) counter-clockwise; 0 for all views when cyclic.
  std::vector<double> position_rad;
};

AngularShares ComputeAngularShares(const std::vector<double>& angles_rad);

// Parallel beams: the shares scaled to sum to pi, the range of distinct directions (a full
// circle sees every line twice and so counts each view half). All equal (pi / count) when
// every angle is the same.
std::vector<double> ParallelBeamWeights(const std::vector<double>& angles_rad);

}  // namespace tomo::core
