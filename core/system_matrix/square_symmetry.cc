#include "core/system_matrix/square_symmetry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tomo::core::system_matrix {
namespace {

Point2 Apply(const SquareMap& m, Point2 p) {
  return {m.xx * p.x + m.xy * p.y, m.yx * p.x + m.yy * p.y};
}
double Distance(Point2 a, Point2 b) { return std::hypot(a.x - b.x, a.y - b.y); }

}  // namespace

int InverseSquareMap(int map) {
  // Rotations by 90 and 270 degrees are each other's inverse; the rest are involutions.
  if (map == 1) return 3;
  if (map == 3) return 1;
  return map;
}

int ComposeSquareMaps(int a, int b) {
  const SquareMap& p = kSquareMaps[static_cast<size_t>(a)];
  const SquareMap& q = kSquareMaps[static_cast<size_t>(b)];
  const int xx = p.xx * q.xx + p.xy * q.yx, xy = p.xx * q.xy + p.xy * q.yy;
  const int yx = p.yx * q.xx + p.yy * q.yx, yy = p.yx * q.xy + p.yy * q.yy;
  for (int m = 0; m < 8; ++m) {
    const SquareMap& r = kSquareMaps[static_cast<size_t>(m)];
    if (r.xx == xx && r.xy == xy && r.yx == yx && r.yy == yy) return m;
  }
  return -1;  // unreachable: the eight maps are a group
}

SymmetryReport DetectSquareSymmetry(const FanScan& scan) {
  SymmetryReport report;
  if (scan.nx() != scan.ny()) {
    report.reason = absl::StrCat("the grid is not square (", scan.nx(), " x ", scan.ny(),
                                 " pixels)");
    return report;
  }
  if (std::abs(scan.pixel_x_mm() - scan.pixel_y_mm()) > 1e-12 * scan.pixel_x_mm()) {
    report.reason = absl::StrCat("the pixels are not square (", scan.pixel_x_mm(), " x ",
                                 scan.pixel_y_mm(), " mm)");
    return report;
  }
  const Point2 center = scan.grid_center_mm();
  const int64_t count = scan.num_views();
  // Views sorted by the angle of their source about the centre, to find images quickly.
  std::vector<std::pair<double, int64_t>> by_angle(static_cast<size_t>(count));
  double scale = 1;
  for (int64_t v = 0; v < count; ++v) {
    const FanView& view = scan.views()[static_cast<size_t>(v)];
    const Point2 s = view.source - center;
    by_angle[static_cast<size_t>(v)] = {std::atan2(s.y, s.x), v};
    scale = std::max(scale, std::hypot(s.x, s.y) + Distance(view.detector_center, center));
  }
  std::sort(by_angle.begin(), by_angle.end());
  const double tolerance = 1e-9 * scale;
  // image[m][v]: the view that map m takes v to, or -1; reversed[m][v]: with u -> -u.
  std::vector<std::vector<int64_t>> image(8, std::vector<int64_t>(static_cast<size_t>(count), -1));
  std::vector<std::vector<char>> reversed(8, std::vector<char>(static_cast<size_t>(count), 0));
  for (int m = 0; m < 8; ++m) {
    const SquareMap& map = kSquareMaps[static_cast<size_t>(m)];
    for (int64_t v = 0; v < count; ++v) {
      const FanView& view = scan.views()[static_cast<size_t>(v)];
      const Point2 s = Apply(map, view.source - center);
      const Point2 d = Apply(map, view.detector_center - center);
      const Point2 u = Apply(map, view.u);
      const double angle = std::atan2(s.y, s.x);
      // Start just below the image's angle (near +pi when the image is just above -pi).
      const double start = angle - 1e-7 < -M_PI ? angle - 1e-7 + 2 * M_PI : angle - 1e-7;
      auto it = std::lower_bound(by_angle.begin(), by_angle.end(),
                                 std::make_pair(start, int64_t{-1}));
      // Candidates: sources within 1e-7 rad of the image (wrapping at -pi / pi).
      for (int64_t k = 0; k < count && image[m][v] < 0; ++k) {
        const auto& candidate =
            by_angle[static_cast<size_t>((it - by_angle.begin() + k) % count)];
        const double gap = std::remainder(candidate.first - angle, 2 * M_PI);
        if (gap > 1e-7) break;
        const FanView& w = scan.views()[static_cast<size_t>(candidate.second)];
        if (Distance(w.source - center, s) > tolerance ||
            Distance(w.detector_center - center, d) > tolerance) {
          continue;
        }
        if (Distance(w.u, u) <= tolerance) {
          image[m][v] = candidate.second;
        } else if (Distance(w.u, Point2{-u.x, -u.y}) <= tolerance) {
          image[m][v] = candidate.second;
          reversed[m][v] = 1;
        }
      }
      if (image[m][v] < 0) {
        report.reason = absl::StrCat("no view is the image of view ", v, " under the ",
                                     map.name, " about the grid centre");
        return report;
      }
    }
  }
  report.eight_fold = true;
  report.views.assign(static_cast<size_t>(count), ViewSymmetry{-1, 0, false});
  for (int64_t v = 0; v < count; ++v) {
    if (report.views[static_cast<size_t>(v)].stored >= 0) continue;
    const int64_t stored = static_cast<int64_t>(report.stored_views.size());
    report.stored_views.push_back(v);
    report.orbits.emplace_back();
    for (int m = 0; m < 8; ++m) {
      const int64_t w = image[m][v];
      ViewSymmetry& target = report.views[static_cast<size_t>(w)];
      if (target.stored >= 0) continue;
      target = {stored, m, reversed[m][v] != 0};
      report.orbits.back().push_back(w);
    }
  }
  return report;
}

}  // namespace tomo::core::system_matrix
