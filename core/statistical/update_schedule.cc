#include "core/statistical/update_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/base/parallel_for.h"

namespace tomo::core::statistical {
namespace {

struct ColumnRange {
  int first, last;
};

// The detector columns a voxel column touches in each view.
std::vector<ColumnRange> ColumnRanges(const SeparableFootprintProjector& projector, int32_t column) {
  const int64_t nx = projector.volume().size().x;
  std::vector<ColumnRange> ranges(static_cast<size_t>(projector.num_views()));
  for (int64_t view = 0; view < projector.num_views(); ++view) {
    const SfColumn col = projector.Column(view, column % nx, column / nx);
    ranges[static_cast<size_t>(view)] = {col.first_column, col.last_column};
  }
  return ranges;
}

bool DisjointInEveryView(const SeparableFootprintProjector& projector,
                         const std::vector<ColumnRange>& a, int32_t column) {
  const int64_t nx = projector.volume().size().x;
  for (int64_t view = 0; view < projector.num_views(); ++view) {
    const ColumnRange& ra = a[static_cast<size_t>(view)];
    if (ra.first > ra.last) continue;
    const SfColumn col = projector.Column(view, column % nx, column / nx);
    if (col.first_column > col.last_column) continue;
    if (!(ra.last < col.first_column || col.last_column < ra.first)) return false;
  }
  return true;
}

}  // namespace

UpdateSchedule UpdateSchedule::Make(const SeparableFootprintProjector& projector,
                                    const ZVoxelGroups& groups,
                                    const std::vector<int32_t>& column_order,
                                    int columns_per_step) {
  const int64_t count = static_cast<int64_t>(column_order.size());
  // partner[i]: index in the order of column i's partner, or -1; partners lie later.
  std::vector<int64_t> partner(static_cast<size_t>(count), -1);
  if (columns_per_step >= 2) {
    const int threads = DefaultThreadCount();
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, count / 1024));
    ParallelFor(parts, [&](int64_t p0, int64_t p1) {
      for (int64_t part = p0; part < p1; ++part) {
        const int64_t begin = count * part / parts, end = count * (part + 1) / parts;
        std::vector<bool> taken(static_cast<size_t>(end - begin), false);
        for (int64_t i = begin; i < end; ++i) {
          if (taken[static_cast<size_t>(i - begin)]) continue;
          const std::vector<ColumnRange> ranges = ColumnRanges(projector, column_order[i]);
          int64_t searched = 0;
          for (int64_t j = i + 1; j < end && searched < kPartnerSearch; ++j) {
            if (taken[static_cast<size_t>(j - begin)]) continue;
            ++searched;
            // Never prior neighbours (their updates would depend on each other).
            const int64_t nx = projector.volume().size().x;
            const int32_t a = column_order[i], b = column_order[j];
            if (std::abs(a % nx - b % nx) <= 1 && std::abs(a / nx - b / nx) <= 1) continue;
            if (DisjointInEveryView(projector, ranges, column_order[j])) {
              partner[static_cast<size_t>(i)] = j;
              taken[static_cast<size_t>(j - begin)] = true;
              break;
            }
          }
        }
      }
    }, parts);
  }
  UpdateSchedule schedule;
  std::vector<bool> done(static_cast<size_t>(count), false);
  const int64_t nx = groups.nx(), nz = groups.nz();
  auto group_of = [&](int32_t column, int64_t g) {
    const int32_t stride = groups.Stride(column % nx, column / nx);
    return ScheduledGroup{column, static_cast<int32_t>(g), stride,
                          static_cast<int32_t>((nz - g + stride - 1) / stride)};
  };
  for (int64_t i = 0; i < count; ++i) {
    if (done[static_cast<size_t>(i)]) continue;
    done[static_cast<size_t>(i)] = true;
    const int32_t a = column_order[static_cast<size_t>(i)];
    const int64_t ga = groups.GroupCount(a % nx, a / nx);
    const int64_t j = partner[static_cast<size_t>(i)];
    int64_t gb = 0;
    int32_t b = 0;
    if (j >= 0) {
      done[static_cast<size_t>(j)] = true;
      b = column_order[static_cast<size_t>(j)];
      gb = groups.GroupCount(b % nx, b / nx);
      schedule.paired_columns_ += 2;
    }
    for (int64_t g = 0; g < std::max(ga, gb); ++g) {
      int64_t voxels = 0;
      if (g < ga) {
        schedule.groups_.push_back(group_of(a, g));
        voxels += schedule.groups_.back().size;
      }
      if (g < gb) {
        schedule.groups_.push_back(group_of(b, g));
        voxels += schedule.groups_.back().size;
      }
      schedule.step_offsets_.push_back(static_cast<int64_t>(schedule.groups_.size()));
      schedule.max_step_voxels_ = std::max(schedule.max_step_voxels_, voxels);
    }
  }
  return schedule;
}

}  // namespace tomo::core::statistical
