#include "core/system_matrix/dense_slabs.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::core::system_matrix {
namespace {

struct Entry {
  uint32_t pixel;
  uint32_t key;  // orbit
  float value;
};

// One slab's steps before they are placed: 32 values and pixels per step.
struct Scheduled {
  std::vector<float> values;
  std::vector<uint32_t> pixels;
  int32_t width = 0;
  bool along_x = true;
};

// Lane lists -> steps with the orbits of the weighted lanes of each step distinct.
void Schedule(const std::vector<std::vector<Entry>>& lanes, Scheduled& out) {
  constexpr int kLanes = DenseSlabs::kLanes;
  std::vector<std::vector<char>> consumed(kLanes);
  std::vector<size_t> head(kLanes, 0);
  std::vector<uint32_t> last(kLanes, 0);
  int64_t remaining = 0;
  uint32_t any = 0;  // a pixel of the slab, for the padding of lanes without entries
  for (int l = kLanes - 1; l >= 0; --l) {
    if (!lanes[static_cast<size_t>(l)].empty()) any = lanes[static_cast<size_t>(l)][0].pixel;
  }
  for (int l = 0; l < kLanes; ++l) {
    consumed[static_cast<size_t>(l)].assign(lanes[static_cast<size_t>(l)].size(), 0);
    remaining += static_cast<int64_t>(lanes[static_cast<size_t>(l)].size());
    last[static_cast<size_t>(l)] = lanes[static_cast<size_t>(l)].empty() ? any : lanes[static_cast<size_t>(l)][0].pixel;
  }
  uint32_t claimed[kLanes];
  while (remaining > 0) {
    int taken = 0;
    for (int l = 0; l < kLanes; ++l) {
      const std::vector<Entry>& list = lanes[static_cast<size_t>(l)];
      std::vector<char>& used = consumed[static_cast<size_t>(l)];
      int pick = -1, tried = 0;
      for (size_t i = head[static_cast<size_t>(l)]; i < list.size() && tried < DenseSlabs::kLookahead; ++i) {
        if (used[i]) continue;
        ++tried;
        if (std::find(claimed, claimed + taken, list[i].key) == claimed + taken) {
          pick = static_cast<int>(i);
          break;
        }
      }
      if (pick >= 0) {
        const Entry& e = list[static_cast<size_t>(pick)];
        used[static_cast<size_t>(pick)] = 1;
        claimed[taken++] = e.key;
        --remaining;
        while (head[static_cast<size_t>(l)] < list.size() && used[head[static_cast<size_t>(l)]]) ++head[static_cast<size_t>(l)];
        out.values.push_back(e.value);
        out.pixels.push_back(e.pixel);
        last[static_cast<size_t>(l)] = e.pixel;
      } else {
        out.values.push_back(0.0f);  // padding: weight 0 at the lane's last pixel
        out.pixels.push_back(last[static_cast<size_t>(l)]);
      }
    }
    ++out.width;
  }
}

}  // namespace

uint32_t DenseSlabs::OrbitKey(int32_t n, int32_t ix, int32_t iy) {
  const uint32_t cx = static_cast<uint32_t>(std::abs(2 * ix - (n - 1)));
  const uint32_t cy = static_cast<uint32_t>(std::abs(2 * iy - (n - 1)));
  return (std::max(cx, cy) << 16) | std::min(cx, cy);
}

int DenseSlabs::SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted) {
  const double steps = steps_wanted > 0 ? steps_wanted : kStepsWanted;
  const double mean = a.stored_rows() > 0 ? static_cast<double>(a.stored_nonzeros()) /
                                                static_cast<double>(a.stored_rows())
                                          : 0.0;
  return static_cast<int>(std::clamp(std::lround(mean / steps), 1L, static_cast<long>(kMaxSegments)));
}

absl::StatusOr<DenseSlabs> DenseSlabs::Build(const SymmetricSystemMatrix& a, int segments,
                                             int threads) {
  DenseSlabs d;
  d.segments_ = std::max(1, segments);
  d.n_ = static_cast<int32_t>(a.scan().nx());
  d.columns_ = static_cast<int32_t>(a.scan().columns());
  const int64_t views = a.num_blocks();
  const int64_t groups_per_view = (d.columns_ + kLanes - 1) / kLanes;
  const int64_t groups = views * groups_per_view;
  const int S = d.segments_;
  std::vector<Scheduled> scheduled(static_cast<size_t>(groups * S));
  std::vector<int64_t> group_entries(static_cast<size_t>(groups), 0);
  const StoredRows& s = a.rows();
  ParallelFor(groups, [&](int64_t g0, int64_t g1) {
    std::vector<std::vector<Entry>> rows(kLanes), lanes(kLanes);
    for (int64_t group = g0; group < g1; ++group) {
      const int64_t view = group / groups_per_view;
      const int32_t first_row = static_cast<int32_t>((group % groups_per_view) * kLanes);
      int32_t min_x = d.n_, max_x = -1, min_y = d.n_, max_y = -1;
      for (int l = 0; l < kLanes; ++l) {
        std::vector<Entry>& row = rows[static_cast<size_t>(l)];
        row.clear();
        const int32_t column = first_row + l;
        if (column >= d.columns_) continue;
        const size_t r = static_cast<size_t>(view * d.columns_ + column);
        ForEachRowEntry(s, r, [&](int32_t ix, int32_t iy, float w) {
          if (w == 0.0f) return;
          row.push_back({PackPixel(ix, iy), OrbitKey(d.n_, ix, iy), w});
          min_x = std::min(min_x, ix);
          max_x = std::max(max_x, ix);
          min_y = std::min(min_y, iy);
          max_y = std::max(max_y, iy);
        });
        group_entries[static_cast<size_t>(group)] += static_cast<int64_t>(row.size());
      }
      // Along the ray: by the coordinate the group spans most, then the other.
      const bool along_x = max_x - min_x >= max_y - min_y;
      for (std::vector<Entry>& row : rows) {
        std::sort(row.begin(), row.end(), [along_x](const Entry& p, const Entry& q) {
          const uint32_t px = p.pixel & 0xffffu, py = p.pixel >> 16;
          const uint32_t qx = q.pixel & 0xffffu, qy = q.pixel >> 16;
          return along_x ? (px != qx ? px < qx : py < qy) : (py != qy ? py < qy : px < qx);
        });
      }
      // Segments by position along the rays: segment s holds every lane's entries whose
      // coordinate along the group's axis lies in [bound[s], bound[s + 1]), the bounds cut
      // the group's entries into equal shares. The lanes of a step then stay side by side
      // (rays entering the grid at different places would otherwise be shifted).
      auto along = [along_x](const Entry& e) {
        return static_cast<int32_t>(along_x ? (e.pixel & 0xffffu) : (e.pixel >> 16));
      };
      std::vector<int32_t> pooled;
      for (const std::vector<Entry>& row : rows) {
        for (const Entry& e : row) pooled.push_back(along(e));
      }
      std::sort(pooled.begin(), pooled.end());
      std::vector<int32_t> bound(static_cast<size_t>(S) + 1);
      bound[0] = INT32_MIN;
      bound[static_cast<size_t>(S)] = INT32_MAX;
      for (int seg = 1; seg < S; ++seg) {
        bound[static_cast<size_t>(seg)] =
            pooled.empty() ? INT32_MAX : pooled[pooled.size() * static_cast<size_t>(seg) / static_cast<size_t>(S)];
      }
      for (int seg = 0; seg < S; ++seg) {
        for (int l = 0; l < kLanes; ++l) {
          const std::vector<Entry>& row = rows[static_cast<size_t>(l)];
          std::vector<Entry>& lane = lanes[static_cast<size_t>(l)];
          lane.clear();
          for (const Entry& e : row) {
            const int32_t at = along(e);
            if (at >= bound[static_cast<size_t>(seg)] && at < bound[static_cast<size_t>(seg) + 1]) lane.push_back(e);
          }
        }
        Scheduled& slab = scheduled[static_cast<size_t>(group * S + seg)];
        slab.along_x = along_x;
        Schedule(lanes, slab);
      }
    }
  }, threads);
  d.view_begin_.assign(static_cast<size_t>(views) + 1, 0);
  d.slabs_.resize(scheduled.size());
  int64_t offset = 0;
  for (int64_t group = 0; group < groups; ++group) {
    for (int seg = 0; seg < S; ++seg) {
      const size_t i = static_cast<size_t>(group * S + seg);
      DenseSlab& slab = d.slabs_[i];
      slab.offset = offset;
      slab.stored_view = static_cast<int32_t>(group / groups_per_view);
      slab.first_row = static_cast<int32_t>((group % groups_per_view) * kLanes);
      slab.segment = seg;
      slab.width = scheduled[i].width;
      slab.along_x = scheduled[i].along_x ? 1 : 0;
      offset += static_cast<int64_t>(slab.width) * kLanes;
    }
    d.entries_ += group_entries[static_cast<size_t>(group)];
  }
  for (int64_t v = 0; v <= views; ++v) {
    d.view_begin_[static_cast<size_t>(v)] = v * groups_per_view * S;
  }
  d.values_.resize(static_cast<size_t>(offset));
  d.offsets_.resize(static_cast<size_t>(offset));
  std::vector<char> too_wide(scheduled.size(), 0);
  ParallelFor(static_cast<int64_t>(scheduled.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Scheduled& sc = scheduled[static_cast<size_t>(i)];
      DenseSlab& slab = d.slabs_[static_cast<size_t>(i)];
      uint32_t x0 = 0xffffu, y0 = 0xffffu;
      for (const uint32_t p : sc.pixels) {
        x0 = std::min(x0, p & 0xffffu);
        y0 = std::min(y0, p >> 16);
      }
      if (sc.pixels.empty()) x0 = y0 = 0;
      slab.base = PackPixel(static_cast<int32_t>(x0), static_cast<int32_t>(y0));
      const size_t at = static_cast<size_t>(slab.offset);
      std::copy(sc.values.begin(), sc.values.end(), d.values_.begin() + static_cast<int64_t>(at));
      for (size_t e = 0; e < sc.pixels.size(); ++e) {
        const uint32_t dx = (sc.pixels[e] & 0xffffu) - x0, dy = (sc.pixels[e] >> 16) - y0;
        if (dx > 255 || dy > 255) too_wide[static_cast<size_t>(i)] = 1;
        d.offsets_[at + e] = static_cast<uint16_t>(dx | (dy << 8));
      }
    }
  }, threads);
  for (size_t i = 0; i < too_wide.size(); ++i) {
    if (too_wide[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dense layout: slab ", i, " of ", segments, " segments per row group spans more than "
          "256 pixels; use more segments"));
    }
  }
  return d;
}

uint64_t DenseSlabs::bytes() const {
  return values_.size() * sizeof(float) + offsets_.size() * sizeof(uint16_t) +
         slabs_.size() * sizeof(DenseSlab) + view_begin_.size() * sizeof(int64_t);
}

}  // namespace tomo::core::system_matrix
