#include "core/system_matrix/segmented_runs.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::core::system_matrix {
namespace {

struct Entry {
  int32_t march, minor;
  float value;
};

// One group's slabs before they are placed.
struct GroupSlabs {
  bool along_x = true;
  std::vector<int32_t> bound;               // segments + 1 march columns
  std::vector<int32_t> width;               // per segment
  std::vector<std::vector<float>> values;   // per segment: 32 per step
  std::vector<std::vector<uint32_t>> runs;  // per segment: 32 per column
  int64_t entries = 0;
  bool too_long = false;
};

}  // namespace

int SegmentedRuns::SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted) {
  const double steps = steps_wanted > 0 ? steps_wanted : kStepsWanted;
  const double mean = a.stored_rows() > 0 ? static_cast<double>(a.stored_nonzeros()) /
                                                static_cast<double>(a.stored_rows())
                                          : 0.0;
  return static_cast<int>(std::clamp(std::lround(mean / steps), 1L, static_cast<long>(kMaxSegments)));
}

absl::StatusOr<SegmentedRuns> SegmentedRuns::Build(const SymmetricSystemMatrix& a, int segments,
                                                   int threads) {
  SegmentedRuns d;
  const int S = std::clamp(segments, 1, 255);
  d.segments_ = S;
  d.n_ = static_cast<int32_t>(a.scan().nx());
  d.columns_ = static_cast<int32_t>(a.scan().columns());
  d.groups_per_view_ = (d.columns_ + kLanes - 1) / kLanes;
  const int64_t groups = a.num_blocks() * d.groups_per_view_;
  const StoredRows& s = a.rows();
  std::vector<GroupSlabs> built(static_cast<size_t>(groups));
  ParallelFor(groups, [&](int64_t g0, int64_t g1) {
    std::vector<std::vector<Entry>> rows(kLanes);
    std::vector<int32_t> pooled;
    for (int64_t group = g0; group < g1; ++group) {
      GroupSlabs& out = built[static_cast<size_t>(group)];
      const int64_t view = group / d.groups_per_view_;
      const int32_t first_row = static_cast<int32_t>((group % d.groups_per_view_) * kLanes);
      int32_t min_x = INT32_MAX, max_x = -1, min_y = INT32_MAX, max_y = -1;
      for (int l = 0; l < kLanes; ++l) {
        std::vector<Entry>& row = rows[static_cast<size_t>(l)];
        row.clear();
        const int32_t column = first_row + l;
        if (column >= d.columns_) continue;
        const size_t r = static_cast<size_t>(view * d.columns_ + column);
        ForEachRowEntry(s, r, [&](int32_t ix, int32_t iy, float w) {
          row.push_back({ix, iy, w});
          min_x = std::min(min_x, ix);
          max_x = std::max(max_x, ix);
          min_y = std::min(min_y, iy);
          max_y = std::max(max_y, iy);
        });
        out.entries += static_cast<int64_t>(row.size());
      }
      out.along_x = max_x - min_x >= max_y - min_y;
      pooled.clear();
      for (std::vector<Entry>& row : rows) {
        if (!out.along_x) {
          for (Entry& e : row) std::swap(e.march, e.minor);
        }
        std::sort(row.begin(), row.end(), [](const Entry& p, const Entry& q) {
          return p.march != q.march ? p.march < q.march : p.minor < q.minor;
        });
        for (const Entry& e : row) pooled.push_back(e.march);
      }
      std::sort(pooled.begin(), pooled.end());
      out.bound.assign(static_cast<size_t>(S) + 1, 0);
      const int32_t lowest = pooled.empty() ? 0 : pooled.front();
      const int32_t highest = pooled.empty() ? 0 : pooled.back() + 1;
      out.bound[0] = lowest;
      out.bound[static_cast<size_t>(S)] = highest;
      for (int seg = 1; seg < S; ++seg) {
        out.bound[static_cast<size_t>(seg)] =
            pooled.empty() ? highest
                           : pooled[pooled.size() * static_cast<size_t>(seg) / static_cast<size_t>(S)];
      }
      out.width.assign(static_cast<size_t>(S), 0);
      out.values.assign(static_cast<size_t>(S), {});
      out.runs.assign(static_cast<size_t>(S), {});
      std::vector<size_t> next(kLanes, 0);  // each lane's first entry not yet placed
      for (int seg = 0; seg < S; ++seg) {
        const int32_t begin = out.bound[static_cast<size_t>(seg)];
        const int32_t end = out.bound[static_cast<size_t>(seg) + 1];
        const int32_t columns = end - begin;
        std::vector<uint32_t>& runs = out.runs[static_cast<size_t>(seg)];
        runs.assign(static_cast<size_t>(columns) * kLanes, 0);
        std::vector<std::vector<float>> lane_values(kLanes);
        for (int l = 0; l < kLanes; ++l) {
          const std::vector<Entry>& row = rows[static_cast<size_t>(l)];
          size_t& i = next[static_cast<size_t>(l)];
          std::vector<float>& mine = lane_values[static_cast<size_t>(l)];
          for (int32_t m = begin; m < end; ++m) {
            const uint32_t first = static_cast<uint32_t>(mine.size());
            uint32_t minor = 0, length = 0;
            if (i < row.size() && row[i].march == m) minor = static_cast<uint32_t>(row[i].minor);
            while (i < row.size() && row[i].march == m) {
              mine.push_back(row[i].value);
              ++length;
              ++i;
            }
            if (first >= 2048 || length >= 32) out.too_long = true;
            runs[static_cast<size_t>(m - begin) * kLanes + static_cast<size_t>(l)] =
                PackSegmentedRun(first & 0x7ffu, length & 0x1fu, minor);
          }
          out.width[static_cast<size_t>(seg)] =
              std::max<int32_t>(out.width[static_cast<size_t>(seg)], static_cast<int32_t>(mine.size()));
        }
        std::vector<float>& values = out.values[static_cast<size_t>(seg)];
        values.assign(static_cast<size_t>(out.width[static_cast<size_t>(seg)]) * kLanes, 0.0f);
        for (int l = 0; l < kLanes; ++l) {
          const std::vector<float>& mine = lane_values[static_cast<size_t>(l)];
          for (size_t t = 0; t < mine.size(); ++t) values[t * kLanes + static_cast<size_t>(l)] = mine[t];
        }
      }
    }
  }, threads);
  for (int64_t group = 0; group < groups; ++group) {
    if (built[static_cast<size_t>(group)].too_long) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segmented layout: a lane of row group ", group, " has 2048 or more entries in one of ",
          S, " segments or 32 or more in one column; use more segments"));
    }
  }
  // Place the slabs.
  d.slabs_.resize(static_cast<size_t>(groups * S));
  d.segment_of_column_.assign(static_cast<size_t>(groups) * 2 * static_cast<size_t>(d.n_), 0xff);
  int64_t value_base = 0, run_base = 0;
  for (int64_t group = 0; group < groups; ++group) {
    const GroupSlabs& g = built[static_cast<size_t>(group)];
    d.entries_ += g.entries;
    for (int seg = 0; seg < S; ++seg) {
      SegmentedSlab& slab = d.slabs_[static_cast<size_t>(group * S + seg)];
      slab.value_base = value_base;
      slab.run_base = run_base;
      slab.stored_view = static_cast<int32_t>(group / d.groups_per_view_);
      slab.first_row = static_cast<int32_t>((group % d.groups_per_view_) * kLanes);
      slab.segment = seg;
      slab.width = g.width[static_cast<size_t>(seg)];
      slab.march_begin = g.bound[static_cast<size_t>(seg)];
      slab.march_end = g.bound[static_cast<size_t>(seg) + 1];
      slab.along_x = g.along_x ? 1 : 0;
      value_base += static_cast<int64_t>(g.values[static_cast<size_t>(seg)].size());
      run_base += static_cast<int64_t>(g.runs[static_cast<size_t>(seg)].size());
      // The table: the march columns of the group's axis (x: the first n entries, y: the
      // next n); the other half stays 0xff.
      const size_t table = static_cast<size_t>(group) * 2 * static_cast<size_t>(d.n_) +
                           (g.along_x ? 0 : static_cast<size_t>(d.n_));
      for (int32_t m = slab.march_begin; m < slab.march_end; ++m) {
        d.segment_of_column_[table + static_cast<size_t>(m)] = static_cast<uint8_t>(seg);
      }
    }
  }
  d.values_.resize(static_cast<size_t>(value_base));
  d.runs_.resize(static_cast<size_t>(run_base));
  ParallelFor(groups, [&](int64_t g0, int64_t g1) {
    for (int64_t group = g0; group < g1; ++group) {
      const GroupSlabs& g = built[static_cast<size_t>(group)];
      for (int seg = 0; seg < S; ++seg) {
        const SegmentedSlab& slab = d.slabs_[static_cast<size_t>(group * S + seg)];
        std::copy(g.values[static_cast<size_t>(seg)].begin(), g.values[static_cast<size_t>(seg)].end(),
                  d.values_.begin() + slab.value_base);
        std::copy(g.runs[static_cast<size_t>(seg)].begin(), g.runs[static_cast<size_t>(seg)].end(),
                  d.runs_.begin() + slab.run_base);
      }
    }
  }, threads);
  return d;
}

uint64_t SegmentedRuns::bytes() const {
  return values_.size() * sizeof(float) + runs_.size() * sizeof(uint32_t) +
         slabs_.size() * sizeof(SegmentedSlab) + segment_of_column_.size();
}

}  // namespace tomo::core::system_matrix
