#include "core/statistical/separable_footprint.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core::statistical {
namespace {

std::string VecText(const Vec3& a) { return absl::StrCat("(", a.x, ", ", a.y, ", ", a.z, ")"); }

absl::StatusOr<SfView> MakeView(const ViewVectors& vectors, int64_t index, int64_t rows,
                                int64_t columns) {
  const double u_norm = Norm(vectors.u), v_norm = Norm(vectors.v);
  const std::string where = absl::StrCat("views[", index, "]");
  if (std::abs(vectors.u.z) > SeparableFootprintProjector::kOrientationTolerance * u_norm) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".u: ", VecText(vectors.u),
        " has a z component; the separable footprint needs horizontal detector columns "
        "(|u.z| / |u| <= ", SeparableFootprintProjector::kOrientationTolerance, ")"));
  }
  if (std::hypot(vectors.v.x, vectors.v.y) >
      SeparableFootprintProjector::kOrientationTolerance * v_norm) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".v: ", VecText(vectors.v),
        " is not along the z axis; the separable footprint needs detector rows parallel to "
        "the rotation axis (|v_xy| / |v| <= ", SeparableFootprintProjector::kOrientationTolerance,
        ")"));
  }
  SfView view;
  const Vec3& s = vectors.source;
  view.source_x = s.x;
  view.source_y = s.y;
  view.source_z = s.z;
  const double u_planar = std::hypot(vectors.u.x, vectors.u.y);
  view.u_x = vectors.u.x / u_planar;
  view.u_y = vectors.u.y / u_planar;
  view.n_x = -view.u_y;
  view.n_y = view.u_x;
  const Vec3 to_detector = vectors.detector_center - s;
  double distance = to_detector.x * view.n_x + to_detector.y * view.n_y;
  if (distance < 0) {
    view.n_x = -view.n_x;
    view.n_y = -view.n_y;
    distance = -distance;
  }
  if (!(distance > 1e-9 * Norm(to_detector))) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".source: ", VecText(s), " lies in the detector plane"));
  }
  view.distance = distance;
  view.inv_column_mm = 1.0 / u_planar;
  // The foot of the source: s + distance n; its column coordinate relative to the centre.
  const double source_along = -(to_detector.x * view.u_x + to_detector.y * view.u_y);
  view.column_origin = source_along / u_planar + 0.5 * static_cast<double>(columns - 1);
  const double sign = vectors.v.z > 0 ? 1.0 : -1.0;
  view.row_scale = sign / v_norm;
  view.row_origin = -to_detector.z * view.row_scale + 0.5 * static_cast<double>(rows - 1);
  return view;
}

}  // namespace

absl::StatusOr<SeparableFootprintProjector> SeparableFootprintProjector::Create(
    const VectorGeometry& geometry, const VolumeGeometry& volume) {
  if (geometry.beam() != BeamKind::kCone) {
    return absl::InvalidArgumentError(
        "beam: parallel; the separable-footprint projector here takes cone beams only");
  }
  if (geometry.detector() != DetectorShape::kFlat) {
    return absl::InvalidArgumentError(
        "detector: cylindrical; the separable-footprint projector needs a flat detector");
  }
  TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume));
  std::vector<SfView> views;
  views.reserve(static_cast<size_t>(geometry.num_views()));
  const double x_edges[2] = {volume.x_mm(-0.5), volume.x_mm(volume.size().x - 0.5)};
  const double y_edges[2] = {volume.y_mm(-0.5), volume.y_mm(volume.size().y - 0.5)};
  for (int64_t i = 0; i < geometry.num_views(); ++i) {
    TOMO_ASSIGN_OR_RETURN(SfView view, MakeView(geometry.views()[static_cast<size_t>(i)], i,
                                                geometry.rows(), geometry.columns()));
    // Every corner of the volume's footprint in the xy plane must be in front of the
    // source, else the projection of a voxel is not the trapezoid of its corners.
    for (double x : x_edges) {
      for (double y : y_edges) {
        const double depth = (x - view.source_x) * view.n_x + (y - view.source_y) * view.n_y;
        if (!(depth > 0)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "views[", i, "].source: (", view.source_x, ", ", view.source_y, ", ",
              view.source_z, ") does not see the volume corner (", x, ", ", y,
              ") in front of it (depth ", depth,
              " mm); the separable footprint needs the whole volume between source and "
              "detector"));
        }
      }
    }
    views.push_back(view);
  }
  return SeparableFootprintProjector(volume, geometry.rows(), geometry.columns(),
                                     std::move(views));
}

std::vector<SfViewF> SeparableFootprintProjector::FloatViews() const {
  std::vector<SfViewF> out;
  out.reserve(views_.size());
  for (const SfView& v : views_) {
    out.push_back(SfViewF{
        static_cast<float>(v.source_x), static_cast<float>(v.source_y),
        static_cast<float>(v.source_z), static_cast<float>(v.u_x), static_cast<float>(v.u_y),
        static_cast<float>(v.n_x), static_cast<float>(v.n_y), static_cast<float>(v.distance),
        static_cast<float>(v.column_origin), static_cast<float>(v.inv_column_mm),
        static_cast<float>(v.row_origin), static_cast<float>(v.row_scale)});
  }
  return out;
}

SfColumn SeparableFootprintProjector::Column(int64_t view, int64_t ix, int64_t iy) const {
  const Vec3& voxel = volume_.voxel_size_mm();
  return MakeColumn<double>(views_[static_cast<size_t>(view)], volume_.x_mm(static_cast<double>(ix)),
                            volume_.y_mm(static_cast<double>(iy)), voxel.x, voxel.y,
                            static_cast<int>(columns_));
}

SfAxial SeparableFootprintProjector::Axial(const SfColumn& column, int64_t iz) const {
  return MakeAxial<double>(column, volume_.z_mm(static_cast<double>(iz)),
                           volume_.voxel_size_mm().z, static_cast<int>(rows_));
}

std::vector<FootprintEntry> SeparableFootprintProjector::VoxelFootprint(int64_t ix, int64_t iy,
                                                                        int64_t iz) const {
  std::vector<FootprintEntry> out;
  for (int64_t view = 0; view < num_views(); ++view) {
    const SfColumn col = Column(view, ix, iy);
    const SfAxial ax = Axial(col, iz);
    for (int r = ax.first_row; r <= ax.last_row; ++r) {
      const double wr = RowWeight(ax, r);
      if (!(wr > 0)) continue;
      for (int c = col.first_column; c <= col.last_column; ++c) {
        const double wc = ColumnWeight(col, c);
        if (!(wc > 0)) continue;
        out.push_back({view, r, c, ax.amplitude * wr * wc});
      }
    }
  }
  return out;
}

absl::StatusOr<Array3D> SeparableFootprintProjector::Forward(const Array3D& volume) const {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("volume", volume.dims(), volume_.dims(), "(z, y, x)"));
  Array3D out(projection_dims());
  const Size3& n = volume_.size();
  ParallelFor(num_views(), [&](int64_t v0, int64_t v1) {
    std::vector<double> column_weights;
    for (int64_t view = v0; view < v1; ++view) {
      for (int64_t iy = 0; iy < n.y; ++iy) {
        for (int64_t ix = 0; ix < n.x; ++ix) {
          const SfColumn col = Column(view, ix, iy);
          if (col.first_column > col.last_column) continue;
          column_weights.clear();
          for (int c = col.first_column; c <= col.last_column; ++c) {
            column_weights.push_back(ColumnWeight(col, c));
          }
          for (int64_t iz = 0; iz < n.z; ++iz) {
            const double value = volume.at(iz, iy, ix);
            if (value == 0) continue;
            const SfAxial ax = Axial(col, iz);
            for (int r = ax.first_row; r <= ax.last_row; ++r) {
              const double scaled = value * ax.amplitude * RowWeight(ax, r);
              float* row = &out.at(view, r, 0);
              for (int c = col.first_column; c <= col.last_column; ++c) {
                row[c] += static_cast<float>(
                    scaled * column_weights[static_cast<size_t>(c - col.first_column)]);
              }
            }
          }
        }
      }
    }
  });
  return out;
}

absl::StatusOr<Array3D> SeparableFootprintProjector::Back(const Array3D& projections) const {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(), projection_dims(),
                                        "(views, rows, columns)"));
  Array3D out(volume_.dims());
  const Size3& n = volume_.size();
  ParallelFor(n.y, [&](int64_t y0, int64_t y1) {
    std::vector<double> sums(static_cast<size_t>(n.z));
    std::vector<double> column_weights;
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int64_t view = 0; view < num_views(); ++view) {
          const SfColumn col = Column(view, ix, iy);
          if (col.first_column > col.last_column) continue;
          column_weights.clear();
          for (int c = col.first_column; c <= col.last_column; ++c) {
            column_weights.push_back(ColumnWeight(col, c));
          }
          for (int64_t iz = 0; iz < n.z; ++iz) {
            const SfAxial ax = Axial(col, iz);
            double sum = 0;
            for (int r = ax.first_row; r <= ax.last_row; ++r) {
              const float* row = projections.data() + (view * rows_ + r) * columns_;
              double along = 0;
              for (int c = col.first_column; c <= col.last_column; ++c) {
                along += column_weights[static_cast<size_t>(c - col.first_column)] * row[c];
              }
              sum += RowWeight(ax, r) * along;
            }
            sums[static_cast<size_t>(iz)] += ax.amplitude * sum;
          }
        }
        for (int64_t iz = 0; iz < n.z; ++iz) {
          out.at(iz, iy, ix) = static_cast<float>(sums[static_cast<size_t>(iz)]);
        }
      }
    }
  });
  return out;
}

}  // namespace tomo::core::statistical
