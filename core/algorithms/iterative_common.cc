#include "core/algorithms/iterative_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <iterator>
#include <numeric>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/operators/matched_back_projection.h"
#include "core/data/dims_check.h"
#include "core/geometry/geometry_builders.h"

namespace tomo::core {
namespace {

// A stride near 0.382 n (1 - 1/golden ratio) that is coprime with n: i s mod n visits
// every index of [0, n) once, consecutive ones far apart.
int64_t SpreadStride(int64_t n) {
  const int64_t nearest = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(0.3819660112501051 * static_cast<double>(n))));
  for (int64_t offset = 0; offset < n; ++offset) {
    const int64_t below = nearest - offset, above = nearest + offset;
    if (below >= 1 && std::gcd(below, n) == 1) return below;
    if (above < n && std::gcd(above, n) == 1) return above;
  }
  return 1;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionViews(int64_t views, int64_t blocks,
                                                                 ViewOrder order) {
  if (blocks < 1 || blocks > views) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blocks: ", blocks, " is out of range [1, ", views, "] (1: SIRT; the number of views, ",
        views, ": SART)"));
  }
  std::vector<std::vector<int64_t>> result(static_cast<size_t>(blocks));
  if (order == ViewOrder::kInterleaved) {
    std::vector<std::vector<int64_t>> dealt(static_cast<size_t>(blocks));
    for (int64_t v = 0; v < views; ++v) dealt[static_cast<size_t>(v % blocks)].push_back(v);
    // The spread visiting order: a stride near 0.382 blocks, coprime with blocks.
    const int64_t stride = SpreadStride(blocks);
    for (int64_t i = 0; i < blocks; ++i) {
      result[static_cast<size_t>(i)] = std::move(dealt[static_cast<size_t>((i * stride) % blocks)]);
    }
    return result;
  }
  // Sequential: the views in index order; golden ratio and random: in their sequence. Cut
  // into consecutive runs either way.
  const std::vector<int64_t> sequence = ViewSequence(views, order);
  const int64_t base = views / blocks;
  const int64_t larger = views % blocks;
  size_t next = 0;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t size = base + (k < larger ? 1 : 0);
    for (int64_t i = 0; i < size; ++i) result[static_cast<size_t>(k)].push_back(sequence[next++]);
  }
  return result;
}

std::vector<int64_t> ViewSequence(int64_t views, ViewOrder order) {
  std::vector<int64_t> sequence;
  sequence.reserve(static_cast<size_t>(std::max<int64_t>(views, 0)));
  switch (order) {
    case ViewOrder::kSequential:
      for (int64_t v = 0; v < views; ++v) sequence.push_back(v);
      break;
    case ViewOrder::kInterleaved: {
      const int64_t stride = SpreadStride(views);
      for (int64_t i = 0; i < views; ++i) sequence.push_back((i * stride) % views);
      break;
    }
    case ViewOrder::kGoldenRatio: {
      // 1 / phi = phi - 1; frac(i / phi) walks the unit interval by the golden angle.
      constexpr double kInverseGoldenRatio = 0.6180339887498949;
      std::set<int64_t> unvisited;
      for (int64_t v = 0; v < views; ++v) unvisited.insert(unvisited.end(), v);
      for (int64_t i = 0; i < views; ++i) {
        double fraction = static_cast<double>(i) * kInverseGoldenRatio;
        fraction -= std::floor(fraction);
        const double target = fraction * static_cast<double>(views);
        // The nearest unvisited index above and below the target, cyclically.
        auto above = unvisited.lower_bound(static_cast<int64_t>(std::ceil(target)));
        if (above == unvisited.end()) above = unvisited.begin();
        auto below = unvisited.upper_bound(static_cast<int64_t>(std::floor(target)));
        below = below == unvisited.begin() ? std::prev(unvisited.end()) : std::prev(below);
        const auto distance = [&](int64_t v) {
          const double d = std::fabs(static_cast<double>(v) - target);
          return std::min(d, static_cast<double>(views) - d);
        };
        const double d_above = distance(*above), d_below = distance(*below);
        auto chosen = d_below < d_above || (d_below == d_above && *below < *above) ? below : above;
        sequence.push_back(*chosen);
        unvisited.erase(chosen);
      }
      break;
    }
    case ViewOrder::kRandom: {
      for (int64_t v = 0; v < views; ++v) sequence.push_back(v);
      std::mt19937_64 generator(kRandomViewOrderSeed);
      // Fisher-Yates with an unbiased draw in [0, i] (std::shuffle and the standard
      // distributions are not the same on every library).
      for (int64_t i = views - 1; i > 0; --i) {
        const uint64_t bound = static_cast<uint64_t>(i) + 1;
        const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                               std::numeric_limits<uint64_t>::max() % bound;
        uint64_t draw = generator();
        while (draw >= limit) draw = generator();
        std::swap(sequence[static_cast<size_t>(i)], sequence[static_cast<size_t>(draw % bound)]);
      }
      break;
    }
  }
  return sequence;
}

Array3D GatherViews(const Array3D& projections, const std::vector<int64_t>& views) {
  const Dims3 dims = projections.dims();
  const int64_t view_size = dims.d1 * dims.d2;
  Array3D result = Array3D::Uninitialized({static_cast<int64_t>(views.size()), dims.d1, dims.d2});
  for (size_t i = 0; i < views.size(); ++i) {
    std::memcpy(result.data() + static_cast<int64_t>(i) * view_size,
                projections.data() + views[i] * view_size,
                static_cast<size_t>(view_size) * sizeof(float));
  }
  return result;
}

uint64_t EffectiveBudget(const RunContext& context, const ResidentOperators& ops) {
  uint64_t budget = context.memory_budget_bytes;
  const uint64_t free = ops.free_bytes();
  if (free > 0 && (budget == 0 || free < budget)) budget = free;
  return budget;
}

absl::Status CheckIterativeInputs(const Geometry& geometry, const VolumeGeometry& volume,
                                  const Array3D& projections, const IterativeOptions& options,
                                  bool constrained_method) {
  TOMO_RETURN_IF_ERROR(ValidateIterativeOptions(options, volume, constrained_method));
  struct Visit {
    const VolumeGeometry& volume;
    const Array3D& projections;
    absl::Status operator()(const VectorGeometry& vectors) const {
      TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                          vectors.projection_dims(), "(views, rows, columns)"));
      return vectors.CheckAgainstVolume(volume);
    }
    absl::Status operator()(const RadonGeometry& radon) const {
      TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(radon));
      return CheckDimsMatch("projections", projections.dims(), radon.projection_dims(),
                            "(directions, 1, samples)");
    }
  };
  return std::visit(Visit{volume, projections}, geometry);
}

WeightGuards WeightGuardsFor(const Geometry& geometry, const VolumeGeometry& volume,
                             ProjectorModel model) {
  const Vec3& voxel = volume.voxel_size_mm();
  struct Visit {
    const VolumeGeometry& volume;
    const Vec3& voxel;
    ProjectorModel model;
    WeightGuards operator()(const VectorGeometry& vectors) const {
      const double smallest = std::min({voxel.x, voxel.y, voxel.z});
      // One view's share of a voxel's column sum: 1 for the plain voxel-driven back
      // projections; V / (A cos a) for the models in mm (matched_back_projection.h), whose
      // mean over the views sets the scale (at 10 nm voxels a whole scan's sum is below a
      // fixed 1e-3).
      double view_share = 1;
      if (model == ProjectorModel::kJoseph || model == ProjectorModel::kJosephExactTranspose2D) {
        const std::vector<double> scales = MakeMatchedWeights(vectors, volume).view_scale;
        view_share = std::accumulate(scales.begin(), scales.end(), 0.0) /
                     static_cast<double>(std::max<size_t>(1, scales.size()));
      }
      return {static_cast<float>(kRowSumEpsilonVoxels * smallest),
              static_cast<float>(kColumnSumEpsilon * view_share)};
    }
    WeightGuards operator()(const RadonGeometry& radon) const {
      // One voxel's whole share of one sample: V / dt (cpu_radon_projector.h).
      const double share = voxel.x * voxel.y * voxel.z / radon.sample_spacing_mm;
      return {static_cast<float>(kRowSumEpsilonVoxels * share),
              static_cast<float>(kColumnSumEpsilon * share)};
    }
  };
  return std::visit(Visit{volume, voxel, model}, geometry);
}

absl::Status CheckFitsBudget(const std::string& method, uint64_t bytes, const std::string& what,
                             const RunContext& context, const ResidentOperators& ops) {
  const uint64_t free = ops.free_bytes();
  const uint64_t budget = EffectiveBudget(context, ops);
  if (budget == 0 || bytes <= budget) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      method, ": needs ", bytes, " bytes on ", ops.name(), " (", what, ") but the memory budget is ",
      budget, " bytes", free > 0 && free == budget ? " (the device's free memory)" : "",
      "; iterative methods keep the whole volume and projections on the device: raise the "
      "budget, use a smaller volume or fewer views"));
}

absl::Status ApplyBox(const IterativeOptions& options, ResidentOperators& ops, ResidentArray& x) {
  if (!std::isfinite(options.lower_bound) && !std::isfinite(options.upper_bound)) {
    return absl::OkStatus();
  }
  // Bounds beyond float's range clamp to infinity, which is what they mean.
  return ops.Clamp(static_cast<float>(options.lower_bound),
                   static_cast<float>(options.upper_bound), x);
}

absl::Status LoadInitialVolume(const IterativeOptions& options, bool constrained,
                               ResidentOperators& ops, ResidentArray& x) {
  if (options.initial_volume != nullptr) {
    TOMO_RETURN_IF_ERROR(ops.Upload(*options.initial_volume, x));
  } else {
    TOMO_RETURN_IF_ERROR(ops.Fill(0.0f, x));
  }
  if (constrained) TOMO_RETURN_IF_ERROR(ApplyBox(options, ops, x));
  return absl::OkStatus();
}

absl::Status MakeRowWeights(ResidentOperators& ops, ResidentProjector& projector,
                            const WeightGuards& guards, ResidentArray& volume_scratch,
                            ResidentArray& row_weights) {
  TOMO_RETURN_IF_ERROR(ops.Fill(1.0f, volume_scratch));
  TOMO_RETURN_IF_ERROR(projector.Forward(volume_scratch, row_weights));
  return ops.InvertGuarded(guards.row, row_weights);
}

absl::Status MakeColumnSums(ResidentOperators& ops, ResidentProjector& projector,
                            ResidentArray& projection_scratch, ResidentArray& column_sums) {
  TOMO_RETURN_IF_ERROR(ops.Fill(1.0f, projection_scratch));
  return projector.Back(projection_scratch, column_sums);
}

absl::Status UpdateVolume(const IterativeOptions& options, const WeightGuards& guards,
                          ResidentOperators& ops, const ResidentArray& back,
                          const ResidentArray& column_sums, ResidentArray& x) {
  // Bounds beyond float's range become infinite, which is what they mean.
  return ops.AddScaledQuotient(static_cast<float>(options.relaxation), back, column_sums,
                               guards.column, static_cast<float>(options.lower_bound),
                               static_cast<float>(options.upper_bound), x);
}

IterationTracker::IterationTracker(std::string method, const IterativeOptions& options,
                                   const RunContext& context, double b_norm2, Dims3 volume_dims)
    : method_(std::move(method)),
      options_(options),
      context_(context),
      b_norm_(b_norm2 > 0 ? std::sqrt(b_norm2) : 1.0),
      volume_dims_(volume_dims) {}

absl::StatusOr<IterativeResult> IterationTracker::TakeResult(ResidentOperators& ops,
                                                             const ResidentArray& x) {
  IterativeResult result;
  result.volume = Array3D::Uninitialized(volume_dims_);
  TOMO_RETURN_IF_ERROR(ops.Download(x, result.volume));
  result.relative_residuals = std::move(relative_residuals_);
  result.stopped_by_residual = stopped_by_residual_;
  return result;
}

absl::StatusOr<bool> IterationTracker::Finish(int64_t iteration, double residual_norm2,
                                              ResidentOperators& ops, const ResidentArray& x) {
  const double relative = std::sqrt(std::max(0.0, residual_norm2)) / b_norm_;
  relative_residuals_.push_back(relative);
  ProgressUpdate update;
  update.fraction = static_cast<double>(iteration) / static_cast<double>(options_.iterations);
  update.stage = absl::StrFormat("%s: relative residual %.4g", method_, relative);
  update.iteration = static_cast<uint32_t>(iteration);
  update.iterations_total = static_cast<uint32_t>(options_.iterations);
  update.relative_residual = relative;
  context_.Report(update);
  if (options_.on_iteration) {
    IterationReport report;
    report.iteration = iteration;
    report.relative_residual = relative;
    Array3D volume;
    if (options_.observe_volume) {
      volume = Array3D::Uninitialized(volume_dims_);
      TOMO_RETURN_IF_ERROR(ops.Download(x, volume));
      report.volume = &volume;
    }
    TOMO_RETURN_IF_ERROR(options_.on_iteration(report));
  }
  if (options_.stop_relative_residual > 0 && relative <= options_.stop_relative_residual) {
    stopped_by_residual_ = true;
    return true;
  }
  return false;
}

absl::Status IterationTracker::CheckCancelled(int64_t iteration) const {
  return context_.CheckCancelled(absl::StrCat(method_, " / iteration ", iteration));
}

}  // namespace tomo::core
