#include "core/operators/matched_back_projection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tomo::core {
namespace {

// Detector positions sampled per axis for the mean of 1 / cos a (the mean over 17 x 17
// evenly spread pixels is within 1e-4 of the mean over every pixel for the smooth
// obliquity of real detectors).
constexpr int64_t kSamplesPerAxis = 17;

std::vector<double> SamplePositions(int64_t count) {
  std::vector<double> positions;
  const int64_t n = std::min(count, kSamplesPerAxis);
  for (int64_t i = 0; i < n; ++i) {
    positions.push_back(n == 1 ? 0.5 * static_cast<double>(count - 1)
                               : static_cast<double>(i) * static_cast<double>(count - 1) /
                                     static_cast<double>(n - 1));
  }
  return positions;
}

}  // namespace

MatchedWeights MakeMatchedWeights(const VectorGeometry& geometry, const VolumeGeometry& volume) {
  const Vec3 voxel = volume.voxel_size_mm();
  const bool two_dimensional = geometry.rows() == 1 && volume.size().z == 1;
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  MatchedWeights weights;
  weights.distance_power = !cone ? 0 : two_dimensional ? 1 : 2;
  const std::vector<double> rows = SamplePositions(geometry.rows());
  const std::vector<double> columns = SamplePositions(geometry.columns());
  weights.view_scale.reserve(static_cast<size_t>(geometry.num_views()));
  for (int64_t view = 0; view < geometry.num_views(); ++view) {
    const ViewVectors& vectors = geometry.views()[static_cast<size_t>(view)];
    const Vec3 v_unit = (1.0 / Norm(vectors.v)) * vectors.v;
    // V / A; in 2D the slice's thickness stands for the row's height on both sides.
    const double pixel_area = cylindrical ? Norm(vectors.u) * Norm(vectors.v)
                                          : Norm(Cross(vectors.u, vectors.v));
    const double volume_over_area =
        two_dimensional
            ? voxel.x * voxel.y / (cylindrical ? Norm(vectors.u) : Norm(Cross(vectors.u, v_unit)))
            : voxel.x * voxel.y * voxel.z / pixel_area;
    const Vec3 normal = (1.0 / Norm(Cross(vectors.u, vectors.v))) * Cross(vectors.u, vectors.v);
    double mean_obliquity = 0;
    if (!cone) {
      mean_obliquity = 1.0 / std::abs(Dot(vectors.source, normal));
    } else {
      double sum = 0;
      for (double row : rows) {
        for (double column : columns) {
          const Vec3 ray = geometry.PixelPosition(view, row, column) - vectors.source;
          const double across = cylindrical ? Norm(ray - Dot(ray, v_unit) * v_unit)
                                            : std::abs(Dot(ray, normal));
          sum += Norm(ray) / across;
        }
      }
      mean_obliquity = sum / static_cast<double>(rows.size() * columns.size());
    }
    weights.view_scale.push_back(volume_over_area * mean_obliquity);
  }
  return weights;
}

}  // namespace tomo::core
