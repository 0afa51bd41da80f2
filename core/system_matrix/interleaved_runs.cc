#include "core/system_matrix/interleaved_runs.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::core::system_matrix {

int InterleavedRuns::SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted) {
  const double steps = steps_wanted > 0 ? steps_wanted : kStepsWanted;
  const double mean = a.stored_rows() > 0 ? static_cast<double>(a.stored_nonzeros()) /
                                                static_cast<double>(a.stored_rows())
                                          : 0.0;
  return static_cast<int>(std::clamp(std::lround(mean / steps), 1L, static_cast<long>(kMaxSegments)));
}

absl::StatusOr<InterleavedRuns> InterleavedRuns::Build(const SymmetricSystemMatrix& a,
                                                       int segments, int threads) {
  InterleavedRuns d;
  d.segments_ = std::max(1, segments);
  const int S = d.segments_;
  const int64_t columns = a.scan().columns();
  const int64_t views = a.num_blocks();
  const int64_t groups_per_view = (columns + kLanes - 1) / kLanes;
  const int64_t groups = views * groups_per_view;
  const StoredRows& s = a.rows();
  auto row_of = [&](int64_t group, int lane) -> int64_t {  // -1 past the last column
    const int64_t column = (group % groups_per_view) * kLanes + lane;
    return column < columns ? (group / groups_per_view) * columns + column : -1;
  };
  // The groups' widths in values and runs, and their slots.
  std::vector<int64_t> value_base(static_cast<size_t>(groups) + 1, 0);
  std::vector<int64_t> run_base(static_cast<size_t>(groups) + 1, 0);
  std::vector<int64_t> longest(static_cast<size_t>(groups), 0);
  for (int64_t g = 0; g < groups; ++g) {
    int64_t values = 0, runs = 0;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t r = row_of(g, l);
      if (r < 0) continue;
      values = std::max(values, s.row_value_begin[static_cast<size_t>(r) + 1] - s.row_value_begin[static_cast<size_t>(r)]);
      runs = std::max(runs, s.row_run_begin[static_cast<size_t>(r) + 1] - s.row_run_begin[static_cast<size_t>(r)]);
    }
    longest[static_cast<size_t>(g)] = values;
    value_base[static_cast<size_t>(g) + 1] = value_base[static_cast<size_t>(g)] + kLanes * values;
    run_base[static_cast<size_t>(g) + 1] = run_base[static_cast<size_t>(g)] + kLanes * runs;
  }
  if (run_base.back() > int64_t{UINT32_MAX}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stored matrix: ", run_base.back(), " run slots exceed the layout's 2^32"));
  }
  d.values_.assign(static_cast<size_t>(value_base.back()), 0.0f);
  d.runs_.assign(static_cast<size_t>(run_base.back()), RunSlot{});
  d.headers_.resize(static_cast<size_t>(a.stored_rows()));
  d.slabs_.resize(static_cast<size_t>(groups * S));
  d.cursors_.assign(static_cast<size_t>(groups * S * kLanes), 0);
  ParallelFor(groups, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      int32_t min_x = INT32_MAX, max_x = -1, min_y = INT32_MAX, max_y = -1;
      for (int l = 0; l < kLanes; ++l) {
        const int64_t r = row_of(g, l);
        if (r < 0) continue;
        const size_t ru = static_cast<size_t>(r);
        const int64_t first_value = s.row_value_begin[ru];
        const int64_t entries = s.row_value_begin[ru + 1] - first_value;
        for (int64_t e = 0; e < entries; ++e) {
          d.values_[static_cast<size_t>(value_base[static_cast<size_t>(g)] + kLanes * e + l)] =
              s.values[static_cast<size_t>(first_value + e)];
        }
        const int64_t runs = s.row_run_begin[ru + 1] - s.row_run_begin[ru];
        for (int64_t j = 0; j < runs; ++j) {
          const size_t k = static_cast<size_t>(s.row_run_begin[ru] + j);
          d.runs_[static_cast<size_t>(run_base[static_cast<size_t>(g)] + kLanes * j + l)] = {
              static_cast<uint32_t>(s.run_offset[k]),
              static_cast<uint32_t>(s.run_ix_first[k]) | (static_cast<uint32_t>(s.run_length[k]) << 16)};
          const int32_t iy = s.row_iy_first[ru] + static_cast<int32_t>(j);
          min_y = std::min(min_y, iy);
          max_y = std::max(max_y, iy);
          min_x = std::min<int32_t>(min_x, s.run_ix_first[k]);
          max_x = std::max<int32_t>(max_x, s.run_ix_first[k] + s.run_length[k] - 1);
        }
        const uint64_t value_slot = static_cast<uint64_t>(value_base[static_cast<size_t>(g)] + l);
        d.headers_[ru] = {static_cast<uint32_t>(run_base[static_cast<size_t>(g)] + l),
                          static_cast<uint32_t>(value_slot & 0xffffffffu),
                          static_cast<uint32_t>(value_slot >> 32),
                          static_cast<uint32_t>(s.row_iy_first[ru]) | (static_cast<uint32_t>(runs) << 16)};
      }
      for (int seg = 0; seg < S; ++seg) {
        const size_t i = static_cast<size_t>(g * S + seg);
        InterleavedSlab& slab = d.slabs_[i];
        slab.value_base = value_base[static_cast<size_t>(g)];
        slab.cursor_offset = static_cast<int64_t>(i) * kLanes;
        slab.run_base = static_cast<uint32_t>(run_base[static_cast<size_t>(g)]);
        slab.stored_view = static_cast<int32_t>(g / groups_per_view);
        slab.first_row = static_cast<int32_t>((g % groups_per_view) * kLanes);
        slab.segment = seg;
        const int64_t width = longest[static_cast<size_t>(g)];
        slab.step_begin = static_cast<int32_t>(width * seg / S);
        slab.step_end = static_cast<int32_t>(width * (seg + 1) / S);
        slab.along_x = max_x - min_x >= max_y - min_y ? 1 : 0;
      }
      // Each lane's run holding each slab's first entry (runs cover the row's entries in
      // order); the run count when the row ends before it.
      for (int l = 0; l < kLanes; ++l) {
        const int64_t r = row_of(g, l);
        if (r < 0) continue;
        const size_t ru = static_cast<size_t>(r);
        const int64_t runs = s.row_run_begin[ru + 1] - s.row_run_begin[ru];
        int64_t j = 0;
        for (int seg = 0; seg < S; ++seg) {
          const InterleavedSlab& slab = d.slabs_[static_cast<size_t>(g * S + seg)];
          while (j < runs) {
            const size_t k = static_cast<size_t>(s.row_run_begin[ru] + j);
            if (s.run_offset[k] + s.run_length[k] > slab.step_begin) break;
            ++j;
          }
          d.cursors_[static_cast<size_t>(slab.cursor_offset + l)] = static_cast<uint16_t>(j);
        }
      }
    }
  }, threads);
  d.view_begin_.resize(static_cast<size_t>(views) + 1);
  for (int64_t v = 0; v <= views; ++v) d.view_begin_[static_cast<size_t>(v)] = v * groups_per_view * S;
  return d;
}

uint64_t InterleavedRuns::bytes() const {
  return values_.size() * sizeof(float) + runs_.size() * sizeof(RunSlot) +
         headers_.size() * sizeof(RowHeader) + slabs_.size() * sizeof(InterleavedSlab) +
         cursors_.size() * sizeof(uint16_t);
}

}  // namespace tomo::core::system_matrix
