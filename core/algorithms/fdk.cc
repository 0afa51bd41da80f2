#include "core/algorithms/fdk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/angular_weights.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Sources whose z differ by more than this (relative to the orbit radius) are not on one
// circle: a helix (or a wobble) that FDK cannot reconstruct.
constexpr double kCircularOrbitRelativeZ = 1e-6;
// Slack on the short-scan minimum, for angles computed in float64 from degrees.
constexpr double kRangeToleranceRad = 1e-6;
// At most this many back projection calls (cancellation points); each call returns a whole
// volume, so more blocks cost more host memory traffic.
constexpr int64_t kMaxBackProjectionBlocks = 4;

double Degrees(double radians) { return radians * 180.0 / kPi; }

// The view's rotation angle theta from the builders' convention (docs/geometry.md):
// parallel rays travel along r = (sin theta, -cos theta, 0); a cone source sits at
// -R r(theta) = (-R sin theta, R cos theta, z).
double ViewAngle(BeamKind beam, const ViewVectors& view) {
  if (beam == BeamKind::kParallel) return std::atan2(view.source.x, -view.source.y);
  return std::atan2(-view.source.x, view.source.y);
}

// The in-plane angle gamma of the ray from the source through `pixel`, measured from the
// ray through the rotation axis, positive towards e_u(theta) = (cos theta, sin theta)
// (counter-clockwise). With it the ray (theta, gamma) has conjugate
// (theta + pi + 2 gamma, -gamma), the relation Parker's weights are built on.
double FanAngle(const Vec3& source, const Vec3& pixel) {
  const double cx = -source.x, cy = -source.y;  // towards the axis
  const double dx = pixel.x - source.x, dy = pixel.y - source.y;
  return std::atan2(cx * dy - cy * dx, cx * dx + cy * dy);
}

// Parker's short-scan weight (Parker 1982) for a scan over beta in [0, pi + 2 delta], delta
// at least the half fan angle (delta larger than the half fan is Wesarg's generalisation:
// the plateau grows). Rays and their conjugates sum to 1; the ends taper to 0 smoothly.
double ParkerWeight(double beta, double gamma, double delta) {
  const double quarter_pi = 0.25 * kPi;
  if (beta < 2.0 * (delta - gamma)) {
    if (delta - gamma <= 0) return 0.0;
    const double s = std::sin(quarter_pi * beta / (delta - gamma));
    return s * s;
  }
  if (beta > kPi - 2.0 * gamma) {
    if (delta + gamma <= 0) return 0.0;
    const double s =
        std::sin(quarter_pi * std::max(0.0, kPi + 2.0 * delta - beta) / (delta + gamma));
    return s * s;
  }
  return 1.0;
}

// Back projects `filtered` in view blocks, checking for cancellation and reporting
// progress between them, and sums the blocks.
absl::StatusOr<Array3D> BackProjectInBlocks(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume, const Array3D& filtered,
                                            BackProjectionWeighting weighting, Backend& backend,
                                            const RunContext& context) {
  const int64_t views = geometry.num_views();
  const int64_t blocks = context.is_cancelled ? std::min(views, kMaxBackProjectionBlocks) : 1;
  if (blocks == 1) {
    Array3D result(volume.dims());
    TOMO_RETURN_IF_ERROR(backend.BackProject(geometry, volume, filtered, weighting, result));
    return result;
  }
  const int64_t view_size = geometry.rows() * geometry.columns();
  Array3D sum(volume.dims());
  Array3D part(volume.dims());
  for (int64_t block = 0; block < blocks; ++block) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / back projection"));
    const int64_t begin = block * views / blocks;
    const int64_t end = (block + 1) * views / blocks;
    std::vector<ViewVectors> block_views(geometry.views().begin() + begin,
                                         geometry.views().begin() + end);
    TOMO_ASSIGN_OR_RETURN(
        VectorGeometry block_geometry,
        VectorGeometry::Create(geometry.beam(), geometry.detector(), geometry.rows(),
                               geometry.columns(), std::move(block_views)));
    Array3D block_data({end - begin, geometry.rows(), geometry.columns()});
    std::copy(filtered.data() + begin * view_size, filtered.data() + end * view_size,
              block_data.data());
    TOMO_RETURN_IF_ERROR(backend.BackProject(block_geometry, volume, block_data, weighting, part));
    float* out = sum.data();
    const float* in = part.data();
    for (int64_t i = 0; i < sum.size(); ++i) out[i] += in[i];
    context.Report({0.5 + 0.5 * static_cast<double>(block + 1) / static_cast<double>(blocks),
                    "back projection"});
  }
  return sum;
}

// Ramp-filters every row in place with the filter made for `spacing_mm[0]`, after scaling
// view i by spacing_mm[0] / spacing_mm[i] (the ramp's response is inversely proportional to
// the spacing, so that is the filter for its own spacing) times view_scale[i].
absl::Status FilterViews(const FdkOptions& options, const std::vector<double>& spacing_mm,
                         const std::vector<double>& view_scale, Backend& backend, Array3D& data) {
  TOMO_ASSIGN_OR_RETURN(RampFilter filter,
                        RampFilter::Create(options.filter, data.dims().d2, spacing_mm[0]));
  TOMO_RETURN_IF_ERROR(backend.FilterRows(filter, data));
  const int64_t view_size = data.dims().d1 * data.dims().d2;
  for (int64_t v = 0; v < data.dims().d0; ++v) {
    const size_t i = static_cast<size_t>(v);
    const float scale = static_cast<float>(view_scale[i] * spacing_mm[0] / spacing_mm[i]);
    float* values = data.data() + v * view_size;
    for (int64_t k = 0; k < view_size; ++k) values[k] *= scale;
  }
  return absl::OkStatus();
}

// Parallel beams: f = integral over [0, pi) of the ramp-filtered projection at the voxel's
// detector position. The vector back projector interpolates (bilinear, weights summing to
// 1), so unlike Fbp's Joseph transpose no ds / (voxel area) factor is needed: each view's
// scale is just its angular weight.
absl::StatusOr<Array3D> ParallelFbp(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                    const Array3D& projections, const FdkOptions& options,
                                    Backend& backend, const RunContext& context) {
  const int64_t views = geometry.num_views();
  std::vector<double> angles(static_cast<size_t>(views));
  std::vector<double> spacing(static_cast<size_t>(views));
  for (int64_t v = 0; v < views; ++v) {
    const ViewVectors& view = geometry.views()[static_cast<size_t>(v)];
    angles[static_cast<size_t>(v)] = ViewAngle(BeamKind::kParallel, view);
    spacing[static_cast<size_t>(v)] = Norm(view.u);
  }
  const std::vector<double> weights = ParallelBeamWeights(angles);

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / weight and filter"));
  context.Report({0.0, "weight and filter"});
  Array3D filtered = projections.Clone();
  TOMO_RETURN_IF_ERROR(FilterViews(options, spacing, weights, backend, filtered));

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / back projection"));
  context.Report({0.5, "back projection"});
  return BackProjectInBlocks(geometry, volume, filtered, BackProjectionWeighting::kNone, backend,
                             context);
}

// Fan and circular cone beams, FDK as in Kak and Slaney (ch. 3.6) on the virtual detector
// through the rotation axis (coordinates scaled by R / D):
//   f(x) = sum over views of  share * (R / U)^2 * q(x's detector position),
//   q = ramp filter (spacing |u| R / D) of  p * cosine weight * (1/2 or Parker),
// with U the depth of x along the central ray (flat) or its in-plane distance from the
// source (cylindrical). The backend's kFdk weight is (D / U)^2, so each view is scaled by
// share * (R / D)^2.
// Cosine weights: flat, D / sqrt(D^2 + a^2 + b^2) = D / |pixel - source| with (a, b) the
// pixel's offset from the principal point. Cylindrical: the equiangular fan-beam formula
// weights by cos gamma (Kak and Slaney 3.4.1, gamma from the ray through the axis) and the
// cone tilt of a pixel at height b on the cylinder of radius D adds D / sqrt(D^2 + b^2)
// (= D / |pixel - source| again). The equiangular formula's angular ramp
// (gamma / sin gamma)^2 h(gamma) becomes, in arc length at the axis (t = R gamma), the plain
// ramp h(t) up to that factor, which is 1 + gamma^2 / 3 + ...: ignored, an error in the
// filter's tail of order gamma^2 (the 2D test at a 51 degree fan measures a central RMSE of
// 0.0042 for the arc against 0.0036 for the flat detector, on densities of 0.2 to 1).
absl::StatusOr<Array3D> ConeFdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                const Array3D& projections, const FdkOptions& options,
                                Backend& backend, const RunContext& context) {
  const int64_t views = geometry.num_views();
  const int64_t rows = geometry.rows();
  const int64_t columns = geometry.columns();
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;

  // Circular orbit: every source at the same z.
  double z_min = geometry.views()[0].source.z, z_max = z_min, radius_max = 0;
  for (const ViewVectors& view : geometry.views()) {
    z_min = std::min(z_min, view.source.z);
    z_max = std::max(z_max, view.source.z);
    radius_max = std::max(radius_max, std::hypot(view.source.x, view.source.y));
  }
  if (z_max - z_min > kCircularOrbitRelativeZ * std::max(1.0, radius_max)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "geometry: the sources move along z (from ", z_min, " to ", z_max,
        " mm): FDK needs a circular orbit; reconstruct a helical scan with an iterative "
        "method or a helical FBP"));
  }

  std::vector<double> angles(static_cast<size_t>(views));
  std::vector<double> source_origin(static_cast<size_t>(views));
  std::vector<double> source_detector(static_cast<size_t>(views));
  std::vector<double> spacing(static_cast<size_t>(views));
  for (int64_t v = 0; v < views; ++v) {
    const size_t i = static_cast<size_t>(v);
    const ViewVectors& view = geometry.views()[i];
    angles[i] = ViewAngle(BeamKind::kCone, view);
    source_origin[i] = std::hypot(view.source.x, view.source.y);
    const Vec3 to_center = view.detector_center - view.source;
    if (cylindrical) {
      const Vec3 along_v = Normalized(view.v);
      source_detector[i] = Norm(to_center - Dot(to_center, along_v) * along_v);
    } else {
      source_detector[i] = std::fabs(Dot(to_center, Normalized(Cross(view.u, view.v))));
    }
    if (!(source_origin[i] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "views[", v, "].source: lies on the rotation axis; FDK needs a circular orbit"));
    }
    spacing[i] = Norm(view.u) * source_origin[i] / source_detector[i];
  }

  // Fan angle over the pixel edges of the first view (the rays that reach the detector).
  const double mid_row = 0.5 * static_cast<double>(rows - 1);
  const Vec3& source0 = geometry.views()[0].source;
  const double gamma_low = FanAngle(source0, geometry.PixelPosition(0, mid_row, -0.5));
  const double gamma_high =
      FanAngle(source0, geometry.PixelPosition(0, mid_row, static_cast<double>(columns) - 0.5));
  const double half_fan = std::max(std::fabs(gamma_low), std::fabs(gamma_high));

  const AngularShares shares = ComputeAngularShares(angles);
  const double minimum = kPi + 2.0 * half_fan;
  if (!shares.cyclic && shares.range_rad < minimum - kRangeToleranceRad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "angles: the views span ", Degrees(shares.range_rad),
        " degrees; FDK needs a full scan (360) or a short scan of at least 180 + the fan angle ",
        Degrees(2.0 * half_fan), " = ", Degrees(minimum), " degrees"));
  }
  // Parker's delta: the scan covers [0, pi + 2 delta] (each view the middle of its share).
  const double delta = 0.5 * (shares.range_rad - kPi);

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / weight and filter"));
  context.Report({0.0, "weight and filter"});
  Array3D weighted = projections.Clone();
  ParallelFor(views, [&](int64_t view_begin, int64_t view_end) {
    std::vector<double> column_weight(static_cast<size_t>(columns));
    for (int64_t v = view_begin; v < view_end; ++v) {
      const size_t i = static_cast<size_t>(v);
      const ViewVectors& view = geometry.views()[i];
      for (int64_t c = 0; c < columns; ++c) {
        const Vec3 pixel = geometry.PixelPosition(v, mid_row, static_cast<double>(c));
        const double gamma = FanAngle(view.source, pixel);
        double w = shares.cyclic ? 0.5 : ParkerWeight(shares.position_rad[i], gamma, delta);
        if (cylindrical) w *= std::cos(gamma);
        column_weight[static_cast<size_t>(c)] = w;
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < columns; ++c) {
          const Vec3 pixel =
              geometry.PixelPosition(v, static_cast<double>(r), static_cast<double>(c));
          const double cosine = source_detector[i] / Norm(pixel - view.source);
          weighted.at(v, r, c) *=
              static_cast<float>(cosine * column_weight[static_cast<size_t>(c)]);
        }
      }
    }
  });
  std::vector<double> view_scale(static_cast<size_t>(views));
  for (size_t i = 0; i < view_scale.size(); ++i) {
    const double ratio = source_origin[i] / source_detector[i];
    view_scale[i] = shares.share_rad[i] * ratio * ratio;
  }
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / weight and filter"));
  TOMO_RETURN_IF_ERROR(FilterViews(options, spacing, view_scale, backend, weighted));

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / back projection"));
  context.Report({0.5, "back projection"});
  return BackProjectInBlocks(geometry, volume, weighted, BackProjectionWeighting::kFdk, backend,
                             context);
}

}  // namespace

absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options, Backend& backend,
                            const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume));
  TOMO_ASSIGN_OR_RETURN(Array3D result,
                        geometry.beam() == BeamKind::kParallel
                            ? ParallelFbp(geometry, volume, projections, options, backend, context)
                            : ConeFdk(geometry, volume, projections, options, backend, context));
  context.Report({1.0, "back projection"});
  return result;
}

}  // namespace tomo::core
