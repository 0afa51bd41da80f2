#include "core/statistical/update_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <utility>

#include "core/base/parallel_for.h"

namespace tomo::core::statistical {
namespace {

// The detector columns [first, last] each voxel column touches in each view, for the
// partner search: (column * views + view). An empty range is first > last.
struct ColumnRange {
  uint16_t first, last;
};

constexpr double kEdgeMargin = 1e-2;

std::vector<ColumnRange> AllColumnRanges(const SeparableFootprintProjector& projector) {
  const int64_t nx = projector.volume().size().x, ny = projector.volume().size().y;
  const int64_t views = projector.num_views();
  std::vector<ColumnRange> ranges(static_cast<size_t>(nx * ny * views));
  ParallelFor(nx * ny, [&](int64_t c0, int64_t c1) {
    for (int64_t column = c0; column < c1; ++column) {
      for (int64_t view = 0; view < views; ++view) {
        const SfColumn col = projector.Column(view, column % nx, column / nx);
        // The trapezoid widened by kEdgeMargin columns: every column the device's float32
        // footprint could touch (its edges move by rounding errors near 1e-4 columns).
        const int first = std::max<int>(
            0, static_cast<int>(std::floor(col.tau0 - kEdgeMargin - 0.5)) + 1);
        const int last = std::min<int>(
            static_cast<int>(projector.columns()) - 1,
            static_cast<int>(std::ceil(col.tau3 + kEdgeMargin + 0.5)) - 1);
        ColumnRange& r = ranges[static_cast<size_t>(column * views + view)];
        if (first > last) {
          r = {1, 0};
        } else {
          r = {static_cast<uint16_t>(first), static_cast<uint16_t>(last)};
        }
      }
    }
  });
  return ranges;
}

bool Disjoint(const ColumnRange* a, const ColumnRange* b, int64_t views) {
  for (int64_t view = 0; view < views; ++view) {
    const ColumnRange& ra = a[view];
    const ColumnRange& rb = b[view];
    if (ra.first > ra.last || rb.first > rb.last) continue;
    if (!(ra.last < rb.first || rb.last < ra.first)) return false;
  }
  return true;
}

}  // namespace

UpdateSchedule UpdateSchedule::Make(const SeparableFootprintProjector& projector,
                                    const ZVoxelGroups& groups,
                                    const std::vector<int32_t>& column_order,
                                    int columns_per_step) {
  const int64_t count = static_cast<int64_t>(column_order.size());
  const int64_t nx = groups.nx(), nz = groups.nz();
  const int64_t views = projector.num_views();
  // members[i]: indices in the order of the columns that share column i's steps (i the
  // first of them); taken columns have an empty list and are skipped.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) members[static_cast<size_t>(i)] = {i};
  const int m = std::clamp(columns_per_step, 1, kMaxColumnsPerStep);
  if (m >= 2) {
    const std::vector<ColumnRange> ranges = AllColumnRanges(projector);
    auto range_of = [&](int64_t index) {
      return ranges.data() + static_cast<int64_t>(column_order[static_cast<size_t>(index)]) * views;
    };
    const int threads = DefaultThreadCount();
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, count / 1024));
    ParallelFor(
        parts,
        [&](int64_t p0, int64_t p1) {
          for (int64_t part = p0; part < p1; ++part) {
            const int64_t begin = count * part / parts, end = count * (part + 1) / parts;
            std::vector<bool> taken(static_cast<size_t>(end - begin), false);
            for (int64_t i = begin; i < end; ++i) {
              if (taken[static_cast<size_t>(i - begin)]) continue;
              std::vector<int64_t>& set = members[static_cast<size_t>(i)];
              int64_t searched = 0;
              for (int64_t j = i + 1; j < end && searched < kPartnerSearch &&
                                      static_cast<int>(set.size()) < m;
                   ++j) {
                if (taken[static_cast<size_t>(j - begin)]) continue;
                ++searched;
                const int32_t b = column_order[static_cast<size_t>(j)];
                bool fits = true;
                for (int64_t member : set) {
                  const int32_t a = column_order[static_cast<size_t>(member)];
                  // Never prior neighbours (their updates would depend on each other).
                  if ((std::abs(a % nx - b % nx) <= 1 && std::abs(a / nx - b / nx) <= 1) ||
                      !Disjoint(range_of(member), range_of(j), views)) {
                    fits = false;
                    break;
                  }
                }
                if (fits) {
                  set.push_back(j);
                  taken[static_cast<size_t>(j - begin)] = true;
                  members[static_cast<size_t>(j)].clear();
                }
              }
            }
          }
        },
        static_cast<int>(parts));
  }
  UpdateSchedule schedule;
  // At most one step per group (the single-voxel update of 512^3 has 1.3e8).
  schedule.groups_.reserve(static_cast<size_t>(groups.total_groups()));
  schedule.step_offsets_.reserve(static_cast<size_t>(groups.total_groups()) + 1);
  auto group_of = [&](int32_t column, int64_t g) {
    const int32_t stride = groups.Stride(column % nx, column / nx);
    return ScheduledGroup{column, static_cast<int32_t>(g), stride,
                          static_cast<int32_t>((nz - g + stride - 1) / stride)};
  };
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<int64_t>& set = members[static_cast<size_t>(i)];
    if (set.empty()) continue;
    if (set.size() > 1) schedule.paired_columns_ += static_cast<int64_t>(set.size());
    int64_t most_groups = 0;
    for (int64_t index : set) {
      const int32_t c = column_order[static_cast<size_t>(index)];
      most_groups = std::max(most_groups, groups.GroupCount(c % nx, c / nx));
    }
    // Member j takes group (k + j) mod most_groups in the set's step k (if it has one): each
    // member still visits each of its groups once, and the groups' sizes, which fall by one
    // from the first to the last, are mixed within a step. For 512 slices in groups of 171,
    // 171 and 170 three columns make steps of 512 voxels instead of 513, 513 and 510: no
    // step then needs a third pass of 256 device threads.
    for (int64_t k = 0; k < most_groups; ++k) {
      int64_t voxels = 0;
      for (size_t j = 0; j < set.size(); ++j) {
        const int32_t c = column_order[static_cast<size_t>(set[j])];
        const int64_t g = (k + static_cast<int64_t>(j)) % most_groups;
        if (g >= groups.GroupCount(c % nx, c / nx)) continue;
        schedule.groups_.push_back(group_of(c, g));
        voxels += schedule.groups_.back().size;
      }
      schedule.step_offsets_.push_back(static_cast<int64_t>(schedule.groups_.size()));
      schedule.max_step_voxels_ = std::max(schedule.max_step_voxels_, voxels);
    }
    schedule.set_offsets_.push_back(schedule.num_steps());
  }
  return schedule;
}

std::vector<int64_t> UpdateSchedule::IterationStepOrder(uint64_t seed, int64_t iteration) const {
  std::vector<int64_t> sets(static_cast<size_t>(num_sets()));
  std::iota(sets.begin(), sets.end(), 0);
  // splitmix64 of (seed, iteration): unrelated streams for neighbouring seeds and iterations.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(iteration + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  std::mt19937_64 random(z ^ (z >> 31));
  std::shuffle(sets.begin(), sets.end(), random);
  std::vector<int64_t> steps;
  steps.reserve(static_cast<size_t>(num_steps()));
  for (int64_t set : sets) {
    for (int64_t step = SetFirstStep(set); step < SetFirstStep(set + 1); ++step) {
      steps.push_back(step);
    }
  }
  return steps;
}

}  // namespace tomo::core::statistical
