#include "core/algorithms/filtered_back_projection.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/angular_weights.h"
#include "core/algorithms/slab_plan.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/geometry/geometry_subset.h"
#include "core/operators/filtered_back_projection_weights.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Sources whose z differ by more than this (relative to the orbit radius) are not on one
// circle: a helix (or a wobble) that FDK cannot reconstruct.
constexpr double kCircularOrbitRelativeZ = 1e-6;
// Two views share one cosine-weight map when their weights differ by less than this (float32
// keeps 6e-8).
constexpr double kSharedCosineTolerance = 1e-9;
// Slack on the short-scan minimum, for angles computed in float64 from degrees.
constexpr double kRangeToleranceRad = 1e-6;
// At most this many back projection calls per slab (cancellation points) when the plan has
// one view chunk on a device backend; each call returns a whole slab, so more blocks cost
// more host traffic.
constexpr int64_t kMaxBackProjectionBlocks = 4;
// On host backends (the CPU's), a cancellation point every this many views instead: four
// blocks of a large cone-beam job took tens of seconds each on the CPU, so a stop waited that
// long (a drained tomod outlived its stop timeout). Each block adds one pass over the slab to
// sum it, about 1/32 of the block's back projection.
constexpr int64_t kHostViewsPerBackProjectionBlock = 32;

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

// Bytes per projection value on the device for the back projection: the CUDA backend keeps
// kFdk projections as float16 in its texture (core/operators/cuda/cuda_backend.cc), every
// other path float32.
int ProjectionValueBytes(const std::vector<Backend*>& backends,
                         BackProjectionWeighting weighting) {
  int bytes = 2;
  for (const Backend* backend : backends) {
    const bool half = weighting == BackProjectionWeighting::kFdk &&
                      absl::StartsWith(backend->name(), "cuda");
    bytes = std::max(bytes, half ? 2 : 4);
  }
  return bytes;
}

// The views of one chunk: its geometry and its filtered projections, or the whole set.
struct ChunkInput {
  const VectorGeometry* geometry = nullptr;
  const Array3D* data = nullptr;
};

// The filter and weights for backends that filter and back project in one call
// (Backend::FilterAndBackProject): the data passed to BackProjectBySlabs are then the raw
// projections.
struct FusedFilter {
  const RampFilter* filter = nullptr;
  const FilteredBackProjectionWeights* weights = nullptr;
};

// Back projects `data` (filtered projections, or raw ones with `fused`) into `volume` slab
// by slab and view chunk by view chunk as the SlabPlan for context.memory_budget_bytes says
// (core/algorithms/slab_plan.h), each slab written into its place in the result. With
// several backends the slabs are handed out to one host thread per backend (at least one
// slab per backend). Cancellation and progress between chunks. Without `fused`, with one
// chunk in the plan and a cancellable context, the views are still cut into blocks
// (cancellation points: up to kMaxBackProjectionBlocks on devices, one per
// kHostViewsPerBackProjectionBlock views on the host); the blocks are the same for every
// slab, so a split volume equals the unsplit one voxel for voxel (the back projection is
// voxel-wise). `plan` is the caller's PlanSlabs for these backends and budget; `fused`
// needs a plan of one view chunk (the caller checks).
absl::StatusOr<Array3D> BackProjectBySlabs(const VectorGeometry& geometry,
                                           const VolumeGeometry& volume, const Array3D& data,
                                           BackProjectionWeighting weighting,
                                           const std::vector<Backend*>& backends,
                                           const RunContext& context, const SlabPlan& plan,
                                           const FusedFilter* fused = nullptr) {
  const int64_t views = geometry.num_views();
  std::vector<ViewChunk> chunks = plan.view_chunks;
  if (fused != nullptr && chunks.size() != 1) {
    return absl::InternalError("fdk: a fused filter needs one view chunk");
  }
  if (chunks.size() == 1 && context.is_cancelled && fused == nullptr) {
    const bool on_host = std::none_of(backends.begin(), backends.end(), [](const Backend* b) {
      return b->PrefersFilterAndBackProject();
    });
    const int64_t blocks =
        on_host ? std::max<int64_t>(1, (views + kHostViewsPerBackProjectionBlock - 1) /
                                           kHostViewsPerBackProjectionBlock)
                : std::min(views, kMaxBackProjectionBlocks);
    chunks.clear();
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t begin = block * views / blocks;
      const int64_t end = (block + 1) * views / blocks;
      chunks.push_back({begin, end - begin});
    }
  }

  // The chunks' geometries and data, made once and shared (read-only) by all threads.
  std::vector<VectorGeometry> chunk_geometries;
  std::vector<Array3D> chunk_data;
  std::vector<ChunkInput> inputs;
  if (chunks.size() == 1) {
    inputs.push_back({&geometry, &data});
  } else {
    const int64_t view_size = geometry.rows() * geometry.columns();
    chunk_geometries.reserve(chunks.size());
    chunk_data.reserve(chunks.size());
    for (const ViewChunk& chunk : chunks) {
      const int64_t begin = chunk.first_view, end = chunk.first_view + chunk.views;
      TOMO_ASSIGN_OR_RETURN(VectorGeometry chunk_geometry,
                            SubsetGeometry(geometry, ViewRangeList(begin, end - begin)));
      chunk_geometries.push_back(std::move(chunk_geometry));
      Array3D chunk_values({end - begin, geometry.rows(), geometry.columns()});
      std::copy(data.data() + begin * view_size, data.data() + end * view_size,
                chunk_values.data());
      chunk_data.push_back(std::move(chunk_values));
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      inputs.push_back({&chunk_geometries[i], &chunk_data[i]});
    }
  }

  // Every voxel of the result and of a slab is written by its back projection.
  Array3D result = Array3D::Uninitialized(volume.dims());
  const int64_t slice_size = volume.size().x * volume.size().y;
  const int64_t steps = static_cast<int64_t>(plan.slabs.size() * inputs.size());
  std::mutex mu;  // guards steps_done, error and the progress reports
  int64_t steps_done = 0;
  absl::Status error;
  std::atomic<bool> failed{false};
  std::atomic<size_t> next_slab{0};

  auto step_done = [&] {
    std::lock_guard<std::mutex> lock(mu);
    ++steps_done;
    context.Report({0.5 + 0.5 * static_cast<double>(steps_done) / static_cast<double>(steps),
                    "back projection"});
  };
  // One slab on one backend, into `target` (the slab's dims).
  auto run_slab = [&](Backend& backend, const VolumeGeometry& slab_volume,
                      Array3D& target) -> absl::Status {
    Array3D part;
    if (inputs.size() > 1) {
      // The chunks' back projections are summed into target, which starts unset.
      part = Array3D::Uninitialized(slab_volume.dims());
      ParallelFill(target.data(), target.size(), 0.0f);
    }
    for (const ChunkInput& input : inputs) {
      TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / back projection"));
      if (failed.load()) return absl::OkStatus();  // another thread reports its error
      if (fused != nullptr) {
        TOMO_RETURN_IF_ERROR(backend.FilterAndBackProject(*input.geometry, slab_volume,
                                                          *input.data, *fused->filter,
                                                          *fused->weights, weighting, target));
      } else if (inputs.size() == 1) {
        TOMO_RETURN_IF_ERROR(
            backend.BackProject(*input.geometry, slab_volume, *input.data, weighting, target));
      } else {
        TOMO_RETURN_IF_ERROR(
            backend.BackProject(*input.geometry, slab_volume, *input.data, weighting, part));
        float* out = target.data();
        const float* in = part.data();
        for (int64_t i = 0; i < target.size(); ++i) out[i] += in[i];
      }
      step_done();
    }
    return absl::OkStatus();
  };
  // A backend's thread: takes the next slab until none is left or one failed.
  auto worker = [&](Backend& backend) {
    for (size_t s = next_slab++; s < plan.slabs.size() && !failed.load(); s = next_slab++) {
      const Slab& slab = plan.slabs[s];
      absl::Status status;
      if (plan.slabs.size() == 1) {
        status = run_slab(backend, volume, result);
      } else if (fused != nullptr) {
        // One call per slab (one view chunk): the backend writes the slab into its place
        // in the result, with no array of its own and no second copy (with several devices
        // the host's memory bandwidth is what they share).
        absl::StatusOr<VolumeGeometry> slab_volume = SlabVolume(volume, slab);
        status = slab_volume.status();
        if (status.ok()) status = context.CheckCancelled("fdk / back projection");
        if (status.ok() && !failed.load()) {
          status = backend.FilterAndBackProjectInto(
              *inputs.front().geometry, *slab_volume, *inputs.front().data, *fused->filter,
              *fused->weights, weighting, result.data() + slab.first_slice * slice_size);
          if (status.ok()) step_done();
        }
      } else {
        absl::StatusOr<VolumeGeometry> slab_volume = SlabVolume(volume, slab);
        status = slab_volume.status();
        if (status.ok()) {
          Array3D slab_data = Array3D::Uninitialized(slab_volume->dims());
          status = run_slab(backend, *slab_volume, slab_data);
          if (status.ok()) {
            ParallelCopy(slab_data.data(), slab_data.size(),
                         result.data() + slab.first_slice * slice_size);
          }
        }
      }
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (error.ok()) {
          error = absl::Status(status.code(),
                               plan.slabs.size() == 1
                                   ? std::string(status.message())
                                   : absl::StrCat("slab of slices [", slab.first_slice, ", ",
                                                  slab.first_slice + slab.slices, ") on ",
                                                  backend.name(), ": ", status.message()));
        }
        failed.store(true);
        return;
      }
    }
  };
  if (backends.size() == 1) {
    worker(*backends.front());
  } else {
    std::vector<std::thread> threads;
    threads.reserve(backends.size());
    for (Backend* backend : backends) threads.emplace_back(worker, std::ref(*backend));
    for (std::thread& thread : threads) thread.join();
  }
  if (!error.ok()) return error;
  return result;
}

// What the geometry alone decides: the per-view and per-pixel weights, the detector spacing
// the ramp filter is made for, and the back projection's weighting.
struct FdkWeighting {
  FilteredBackProjectionWeights weights;
  double filter_spacing_mm = 0;
  BackProjectionWeighting back_projection = BackProjectionWeighting::kNone;
};

// Weights (weights.column holds each view's scale), ramp-filters with the filter made for
// `spacing_mm` and back projects slab by slab. On backends that prefer it
// (Backend::PrefersFilterAndBackProject) and with the projections fitting the memory budget
// (one view chunk in the slab plan), each slab is one FilterAndBackProject call on the raw
// projections: the device receives them once per slab, only the rows the slab needs.
// Otherwise the weighted projections are filtered once with the first backend's FilterRows
// and back projected slab by slab.
absl::StatusOr<Array3D> FilterAndBackProjectBySlabs(
    const FdkOptions& options, double spacing_mm, const FilteredBackProjectionWeights& weights,
    const VectorGeometry& geometry, const VolumeGeometry& volume, const Array3D& projections,
    BackProjectionWeighting weighting, const std::vector<Backend*>& backends,
    const RunContext& context) {
  TOMO_ASSIGN_OR_RETURN(RampFilter filter, RampFilter::Create(options.filter, geometry.columns(),
                                                              spacing_mm));
  TOMO_ASSIGN_OR_RETURN(
      SlabPlan plan,
      PlanSlabs(geometry, volume, ProjectionValueBytes(backends, weighting),
                context.memory_budget_bytes, static_cast<int64_t>(backends.size())));
  const bool fused =
      plan.view_chunks.size() == 1 &&
      std::all_of(backends.begin(), backends.end(),
                  [](const Backend* backend) { return backend->PrefersFilterAndBackProject(); });
  if (fused) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / filter and back projection"));
    context.Report({0.5, "back projection"});
    const FusedFilter fused_filter{&filter, &weights};
    return BackProjectBySlabs(geometry, volume, projections, weighting, backends, context, plan,
                              &fused_filter);
  }
  Array3D filtered = projections.Clone();
  ApplyFilteredBackProjectionWeights(weights, filtered);
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / weight and filter"));
  TOMO_RETURN_IF_ERROR(backends.front()->FilterRows(filter, filtered));
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / back projection"));
  context.Report({0.5, "back projection"});
  return BackProjectBySlabs(geometry, volume, filtered, weighting, backends, context, plan);
}

// Column weights (views x columns) that are one scale per view.
std::vector<float> ViewScales(const std::vector<double>& scale, int64_t columns) {
  std::vector<float> column(scale.size() * static_cast<size_t>(columns));
  for (size_t v = 0; v < scale.size(); ++v) {
    std::fill_n(column.begin() + static_cast<int64_t>(v) * columns, columns,
                static_cast<float>(scale[v]));
  }
  return column;
}

// Parallel beams: f = integral over [0, pi) of the ramp-filtered projection at the voxel's
// detector position. The vector back projector interpolates (bilinear, weights summing to
// 1), so unlike Fbp's Joseph transpose no ds / (voxel area) factor is needed: each view's
// scale is just its angular weight.
absl::StatusOr<FdkWeighting> ParallelFbpWeights(const VectorGeometry& geometry,
                                                const RunContext& context) {
  const int64_t views = geometry.num_views();
  std::vector<double> angles(static_cast<size_t>(views));
  std::vector<double> spacing(static_cast<size_t>(views));
  for (int64_t v = 0; v < views; ++v) {
    const ViewVectors& view = geometry.views()[static_cast<size_t>(v)];
    angles[static_cast<size_t>(v)] = ViewAngle(BeamKind::kParallel, view);
    spacing[static_cast<size_t>(v)] = Norm(view.u);
  }
  const std::vector<double> shares = ParallelBeamWeights(angles);

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fdk / weight and filter"));
  context.Report({0.0, "weight and filter"});
  // The filter is made for view 0's spacing; the ramp's response is inversely proportional
  // to the spacing, so view v's scale carries spacing[0] / spacing[v].
  std::vector<double> scale(static_cast<size_t>(views));
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = shares[i] * spacing[0] / spacing[i];
  FdkWeighting prepared;
  prepared.weights.column = ViewScales(scale, geometry.columns());
  prepared.filter_spacing_mm = spacing[0];
  prepared.back_projection = BackProjectionWeighting::kNone;
  return prepared;
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
absl::StatusOr<FdkWeighting> ConeFdkWeights(const VectorGeometry& geometry,
                                            const RunContext& context) {
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
  // Column factor: Parker's weight or the full scan's 1/2, cos gamma for the arc, and the
  // view's scale (its angular share, (R / D)^2 and the spacing ratio to view 0, whose
  // spacing the filter is made for).
  FilteredBackProjectionWeights weights;
  weights.column.resize(static_cast<size_t>(views * columns));
  // A full scan on a flat detector weighs every column alike: no fan angle to compute.
  const bool needs_fan_angle = !shares.cyclic || cylindrical;
  ParallelFor(views, [&](int64_t view_begin, int64_t view_end) {
    for (int64_t v = view_begin; v < view_end; ++v) {
      const size_t i = static_cast<size_t>(v);
      const ViewVectors& view = geometry.views()[i];
      const double ratio = source_origin[i] / source_detector[i];
      const double scale = shares.share_rad[i] * ratio * ratio * spacing[0] / spacing[i];
      for (int64_t c = 0; c < columns; ++c) {
        double w = 0.5;
        if (needs_fan_angle) {
          const Vec3 pixel = geometry.PixelPosition(v, mid_row, static_cast<double>(c));
          const double gamma = FanAngle(view.source, pixel);
          if (!shares.cyclic) w = ParkerWeight(shares.position_rad[i], gamma, delta);
          if (cylindrical) w *= std::cos(gamma);
        }
        weights.column[i * static_cast<size_t>(columns) + static_cast<size_t>(c)] =
            static_cast<float>(w * scale);
      }
    }
  });
  // Pixel factor: the cosine D / |pixel - source|, one map when every view has the same
  // (the detector turns with the source), else one per view.
  auto cosine = [&](int64_t v, double row, double column) {
    const size_t i = static_cast<size_t>(v);
    return source_detector[i] /
           Norm(geometry.PixelPosition(v, row, column) - geometry.views()[i].source);
  };
  bool shared = true;
  const double last_row = static_cast<double>(rows - 1);
  const double last_column = static_cast<double>(columns - 1);
  for (int64_t v = 1; v < views && shared; ++v) {
    // 3 x 3 samples pin down the quadratic form under the square root (flat detectors) and
    // the height term (cylindrical ones).
    for (double r : {0.0, 0.5 * last_row, last_row}) {
      for (double c : {0.0, 0.5 * last_column, last_column}) {
        shared = shared && std::fabs(cosine(v, r, c) - cosine(0, r, c)) <= kSharedCosineTolerance;
      }
    }
  }
  const int64_t maps = shared ? 1 : views;
  weights.pixel.resize(static_cast<size_t>(maps * rows * columns));
  // In parallel over every map's rows (one map: its rows). On a flat detector a row's
  // pixels are its first pixel plus steps of u, so the row goes without PixelPosition per
  // pixel (most of the host's FDK preparation otherwise: 1.2 M pixels for a 960 x 1248
  // detector).
  ParallelFor(maps * rows, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t v = i / rows, r = i % rows;
      float* row = weights.pixel.data() + i * columns;
      if (cylindrical) {
        for (int64_t c = 0; c < columns; ++c) {
          row[c] = static_cast<float>(cosine(v, static_cast<double>(r), static_cast<double>(c)));
        }
        continue;
      }
      const size_t view = static_cast<size_t>(v);
      const Vec3 first = geometry.PixelPosition(v, static_cast<double>(r), 0.0) -
                         geometry.views()[view].source;
      const Vec3& u = geometry.views()[view].u;
      for (int64_t c = 0; c < columns; ++c) {
        row[c] = static_cast<float>(source_detector[view] /
                                    Norm(first + static_cast<double>(c) * u));
      }
    }
  });
  FdkWeighting prepared;
  prepared.weights = std::move(weights);
  prepared.filter_spacing_mm = spacing[0];
  prepared.back_projection = BackProjectionWeighting::kFdk;
  return prepared;
}

absl::StatusOr<FdkWeighting> PrepareWeights(const VectorGeometry& geometry,
                                            const RunContext& context) {
  return geometry.beam() == BeamKind::kParallel ? ParallelFbpWeights(geometry, context)
                                                : ConeFdkWeights(geometry, context);
}

}  // namespace

absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options,
                            const std::vector<Backend*>& backends, const RunContext& context) {
  if (backends.empty()) {
    return absl::InvalidArgumentError("backends: FDK needs at least one backend");
  }
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("backends[", i, "]: is null"));
    }
  }
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume));
  // A budget too small for one slice and one view fails here, before the filtering.
  const BackProjectionWeighting weighting = geometry.beam() == BeamKind::kParallel
                                                ? BackProjectionWeighting::kNone
                                                : BackProjectionWeighting::kFdk;
  TOMO_RETURN_IF_ERROR(PlanSlabs(geometry, volume, ProjectionValueBytes(backends, weighting),
                                 context.memory_budget_bytes,
                                 static_cast<int64_t>(backends.size()))
                           .status());
  TOMO_ASSIGN_OR_RETURN(FdkWeighting prepared, PrepareWeights(geometry, context));
  TOMO_ASSIGN_OR_RETURN(
      Array3D result,
      FilterAndBackProjectBySlabs(options, prepared.filter_spacing_mm, prepared.weights, geometry,
                                  volume, projections, prepared.back_projection, backends,
                                  context));
  context.Report({1.0, "back projection"});
  return result;
}

FdkStream::FdkStream(std::unique_ptr<FilterAndBackProjectStream> stream, Dims3 volume_dims)
    : stream_(std::move(stream)), volume_(Array3D::Uninitialized(volume_dims)) {
  volume_touched_ = std::async(std::launch::async, [bytes = reinterpret_cast<volatile char*>(
                                                        volume_.data()),
                                                    size = volume_.size_bytes()] {
    // One write per page faults it in; the values are the stream's to write.
    constexpr size_t kPage = 4096;
    for (size_t at = 0; at < size; at += kPage) bytes[at] = 0;
  });
}

FdkStream::~FdkStream() {
  if (volume_touched_.valid()) volume_touched_.wait();  // before the volume is freed
}

absl::StatusOr<Array3D> FdkStream::Finish() {
  if (finished_) return absl::FailedPreconditionError("fdk stream: Finish was called before");
  volume_touched_.wait();
  TOMO_RETURN_IF_ERROR(stream_->Finish(volume_));
  finished_ = true;
  return std::move(volume_);
}

absl::StatusOr<std::unique_ptr<FdkStream>> BeginFdk(const VectorGeometry& geometry,
                                                    const VolumeGeometry& volume,
                                                    const FdkOptions& options, Backend& backend,
                                                    const RunContext& context) {
  TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume));
  const BackProjectionWeighting weighting = geometry.beam() == BeamKind::kParallel
                                                ? BackProjectionWeighting::kNone
                                                : BackProjectionWeighting::kFdk;
  TOMO_ASSIGN_OR_RETURN(SlabPlan plan, PlanSlabs(geometry, volume,
                                                 ProjectionValueBytes({&backend}, weighting),
                                                 context.memory_budget_bytes));
  if (plan.slabs.size() != 1 || plan.view_chunks.size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fdk stream: the reconstruction needs ", plan.slabs.size(), " slabs and ",
        plan.view_chunks.size(), " view chunks for the memory budget of ",
        context.memory_budget_bytes, " bytes; it runs once every view is there"));
  }
  TOMO_ASSIGN_OR_RETURN(FdkWeighting prepared, PrepareWeights(geometry, context));
  TOMO_ASSIGN_OR_RETURN(RampFilter filter, RampFilter::Create(options.filter, geometry.columns(),
                                                              prepared.filter_spacing_mm));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<FilterAndBackProjectStream> stream,
                        backend.BeginFilterAndBackProject(geometry, volume, filter,
                                                          prepared.weights,
                                                          prepared.back_projection));
  return std::make_unique<FdkStream>(std::move(stream), volume.dims());
}

absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options, Backend& backend,
                            const RunContext& context) {
  return Fdk(geometry, volume, projections, options, std::vector<Backend*>{&backend}, context);
}

}  // namespace tomo::core
