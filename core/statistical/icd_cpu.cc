#include "core/statistical/icd_cpu.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/statistical/icd_problem.h"
#include "core/statistical/icd_update_math.h"
#include "core/statistical/pwls_cost.h"
#include "core/statistical/update_schedule.h"
#include "core/statistical/z_voxel_groups.h"

namespace tomo::core::statistical {
namespace {

// The transaxial footprints of one column in every view, with their column weights.
struct ColumnFootprints {
  std::vector<SfColumn> per_view;
  std::vector<size_t> weight_offset;
  std::vector<double> weights;
};

void ComputeColumnFootprints(const SeparableFootprintProjector& projector, int64_t ix,
                             int64_t iy, ColumnFootprints& out) {
  out.per_view.clear();
  out.weight_offset.clear();
  out.weights.clear();
  for (int64_t view = 0; view < projector.num_views(); ++view) {
    const SfColumn col = projector.Column(view, ix, iy);
    out.per_view.push_back(col);
    out.weight_offset.push_back(out.weights.size());
    for (int c = col.first_column; c <= col.last_column; ++c) {
      out.weights.push_back(ColumnWeight(col, c));
    }
  }
}

// Calls visit(index into the (view, column, row) arrays, a_ij) for every pixel of voxel iz.
template <typename Visit>
void ForEachFootprintPixel(const SeparableFootprintProjector& projector,
                           const ColumnFootprints& column, int64_t iz, Visit&& visit) {
  const int64_t rows = projector.rows(), columns = projector.columns();
  for (int64_t view = 0; view < projector.num_views(); ++view) {
    const SfColumn& col = column.per_view[static_cast<size_t>(view)];
    if (col.first_column > col.last_column) continue;
    const SfAxial ax = projector.Axial(col, iz);
    if (ax.first_row > ax.last_row) continue;
    const double* wc = column.weights.data() + column.weight_offset[static_cast<size_t>(view)];
    for (int c = col.first_column; c <= col.last_column; ++c) {
      const double column_part = ax.amplitude * wc[c - col.first_column];
      const int64_t base = ViewColumnRowIndex(view, 0, c, rows, columns);
      for (int r = ax.first_row; r <= ax.last_row; ++r) {
        visit(base + r, column_part * RowWeight(ax, r));
      }
    }
  }
}

// The 26 neighbours of (ix, iy, iz) in the z-fastest volume, weight 0 outside.
void GatherNeighbours(const std::vector<float>& volume, const Size3& n, const QggmrfPrior& prior,
                      int64_t ix, int64_t iy, int64_t iz, double* values, double* weights) {
  for (int k = 0; k < 26; ++k) {
    const NeighbourOffset o = NeighbourOffsetOf(k);
    const int64_t jx = ix + o.dx, jy = iy + o.dy, jz = iz + o.dz;
    if (jx < 0 || jx >= n.x || jy < 0 || jy >= n.y || jz < 0 || jz >= n.z) {
      weights[k] = 0;
      values[k] = 0;
      continue;
    }
    weights[k] = prior.neighbour_weights[static_cast<size_t>(k)];
    values[k] = volume[static_cast<size_t>((jy * n.x + jx) * n.z + jz)];
  }
}

}  // namespace

absl::StatusOr<IcdResult> ReconstructIcdCpu(const SeparableFootprintProjector& projector,
                                            const Array3D& line_integrals,
                                            const Array3D& weights,
                                            const Array3D* start_volume,
                                            const IcdOptions& options,
                                            const RunContext& context,
                                            const IcdVolumeObserver& observe) {
  const auto setup_start = std::chrono::steady_clock::now();
  TOMO_ASSIGN_OR_RETURN(IcdProblem problem,
                        PrepareIcdProblem(projector, line_integrals, weights, start_volume,
                                          options, ResidualStart::kCompute));
  const ZVoxelGroups groups = ZVoxelGroups::Find(projector, options.grouping);
  const UpdateSchedule schedule =
      UpdateSchedule::Make(projector, groups, problem.column_order, options.columns_per_step);
  const Size3 n = problem.size;
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(options.prior);
  auto prior_value = [&] {
    return QggmrfPriorValue(options.prior, n, problem.volume.data(), n.z, n.x * n.z, 1);
  };

  IcdResult result;
  result.total_groups = schedule.num_groups();
  result.steps = schedule.num_steps();
  result.paired_columns = schedule.paired_columns();
  result.max_group_size = groups.max_group_size();
  result.mean_group_size = groups.mean_group_size();
  result.initial_cost = HalfWeightedSquares(problem.residual, problem.weights) + prior_value();
  result.setup_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();

  // The footprints of the (at most two) columns of the current step.
  struct CachedColumn {
    int32_t column = -1;
    ColumnFootprints footprints;
  };
  CachedColumn cache[UpdateSchedule::kMaxColumnsPerStep];
  struct StepVoxel {
    const ColumnFootprints* footprints;
    int32_t column;
    int64_t iz;
  };
  std::vector<StepVoxel> voxels;
  std::vector<double> theta1, theta2, delta;
  double neighbour_values[26], neighbour_weights[26];
  for (int64_t iteration = 1; iteration <= options.iterations; ++iteration) {
    const auto start = std::chrono::steady_clock::now();
    for (const int64_t step :
         schedule.IterationStepOrder(options.column_order_seed, iteration)) {
      TOMO_RETURN_IF_ERROR(context.CheckCancelled(
          absl::StrCat("icd / iteration ", iteration, " / column (",
                       schedule.StepBegin(step)->column % n.x, ", ",
                       schedule.StepBegin(step)->column / n.x, ")")));
      voxels.clear();
      for (const ScheduledGroup* g = schedule.StepBegin(step); g != schedule.StepEnd(step); ++g) {
        CachedColumn* slot = nullptr;
        for (CachedColumn& c : cache) {
          if (c.column == g->column) slot = &c;
        }
        if (slot == nullptr) {
          // A slot that holds none of the step's columns.
          for (CachedColumn& c : cache) {
            bool in_step = false;
            for (const ScheduledGroup* h = schedule.StepBegin(step); h != schedule.StepEnd(step);
                 ++h) {
              in_step = in_step || h->column == c.column;
            }
            if (!in_step) {
              slot = &c;
              break;
            }
          }
          slot->column = g->column;
          ComputeColumnFootprints(projector, g->column % n.x, g->column / n.x, slot->footprints);
        }
        for (int64_t iz = g->first_slice; iz < n.z; iz += g->stride) {
          voxels.push_back({&slot->footprints, g->column, iz});
        }
      }
      theta1.assign(voxels.size(), 0.0);
      theta2.assign(voxels.size(), 0.0);
      delta.assign(voxels.size(), 0.0);
      // Back projection of w e and w: theta1, theta2 of every voxel of the step.
      for (size_t v = 0; v < voxels.size(); ++v) {
        double t1 = 0, t2 = 0;
        ForEachFootprintPixel(projector, *voxels[v].footprints, voxels[v].iz,
                              [&](int64_t i, double a) {
                                const double wa = problem.weights[static_cast<size_t>(i)] * a;
                                t1 += wa * problem.residual[static_cast<size_t>(i)];
                                t2 += wa * a;
                              });
        theta1[v] = t1;
        theta2[v] = t2;
      }
      // The voxel updates (no voxel of a step is another's neighbour: slices of a group are
      // >= 2 apart, and paired columns are apart by more than a footprint).
      for (size_t v = 0; v < voxels.size(); ++v) {
        const int64_t ix = voxels[v].column % n.x, iy = voxels[v].column / n.x;
        const int64_t iz = voxels[v].iz;
        GatherNeighbours(problem.volume, n, options.prior, ix, iy, iz, neighbour_values,
                         neighbour_weights);
        float& x = problem.volume[static_cast<size_t>(voxels[v].column * n.z + iz)];
        const double old_value = x;
        x = static_cast<float>(SurrogateVoxelUpdate<double>(old_value, theta1[v], theta2[v],
                                                             neighbour_values, neighbour_weights, k));
        delta[v] = static_cast<double>(x) - old_value;
      }
      // Forward update of the residual.
      for (size_t v = 0; v < voxels.size(); ++v) {
        if (delta[v] == 0) continue;
        ForEachFootprintPixel(projector, *voxels[v].footprints, voxels[v].iz,
                              [&](int64_t i, double a) {
                                problem.residual[static_cast<size_t>(i)] +=
                                    static_cast<float>(a * delta[v]);
                              });
      }
    }
    IcdIterationRecord record;
    record.iteration = iteration;
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record.data_term = HalfWeightedSquares(problem.residual, problem.weights);
    record.prior_term = prior_value();
    record.cost = record.data_term + record.prior_term;
    double residual_norm2 = 0;
    for (float e : problem.residual) residual_norm2 += static_cast<double>(e) * e;
    record.relative_residual = problem.line_integrals_norm2 > 0
                                   ? std::sqrt(residual_norm2 / problem.line_integrals_norm2)
                                   : std::sqrt(residual_norm2);
    result.iterations.push_back(record);
    ProgressUpdate update;
    update.fraction = static_cast<double>(iteration) / static_cast<double>(options.iterations);
    update.stage = "icd";
    update.iteration = static_cast<uint32_t>(iteration);
    update.iterations_total = static_cast<uint32_t>(options.iterations);
    update.relative_residual = record.relative_residual;
    update.cost = record.cost;
    context.Report(update);
    if (observe) observe(iteration, VolumeFromZFastest(problem.volume, n));
  }
  result.volume = VolumeFromZFastest(problem.volume, n);
  return result;
}

}  // namespace tomo::core::statistical
