#include "core/system_matrix/cuda/symmetric_launch_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/system_matrix/square_symmetry.h"

namespace tomo::core::system_matrix::cuda {
namespace {

void SetView(const SymmetricSystemMatrix& a, int64_t view, int32_t place, OrbitBlock& block) {
  const ViewSymmetry& sym = a.symmetry().views[static_cast<size_t>(view)];
  const SquareMap& map = kSquareMaps[static_cast<size_t>(sym.map)];
  const int k = block.count++;
  block.view[k] = place;
  block.m[k][0] = map.xx;
  block.m[k][1] = map.xy;
  block.m[k][2] = map.yx;
  block.m[k][3] = map.yy;
  block.reversed[k] = sym.columns_reversed ? 1 : 0;
  block.map_index[k] = sym.map;
}

// slot_for from the views' maps (after the last SetView).
void FillSlots(OrbitBlock& block) {
  for (int h = 0; h < 8; ++h) {
    for (int g = 0; g < 8; ++g) {
      const int wanted = ComposeSquareMaps(h, InverseSquareMap(g));
      block.slot_for[h][g] = -1;
      for (int k = 0; k < block.count; ++k) {
        if (block.map_index[k] == wanted) block.slot_for[h][g] = static_cast<int8_t>(k);
      }
    }
  }
}

}  // namespace


SquareMapTable SquareMaps() {
  SquareMapTable t{};
  for (int m = 0; m < 8; ++m) {
    const SquareMap& map = kSquareMaps[static_cast<size_t>(m)];
    t.m[m][0] = map.xx;
    t.m[m][1] = map.xy;
    t.m[m][2] = map.yx;
    t.m[m][3] = map.yy;
  }
  return t;
}

absl::StatusOr<std::vector<uint4>> PackRowHeaders(const SymmetricSystemMatrix& a) {
  const size_t rows = static_cast<size_t>(a.stored_rows());
  if (a.row_run_begin().back() > int64_t{UINT32_MAX}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stored matrix: ", a.row_run_begin().back(), " runs exceed the row headers' 2^32"));
  }
  std::vector<uint4> headers(rows);
  for (size_t r = 0; r < rows; ++r) {
    const uint64_t value_begin = static_cast<uint64_t>(a.row_value_begin()[r]);
    const uint32_t runs = static_cast<uint32_t>(a.row_run_begin()[r + 1] - a.row_run_begin()[r]);
    headers[r] = {static_cast<uint32_t>(a.row_run_begin()[r]),
                  static_cast<uint32_t>(value_begin & 0xffffffffu),
                  static_cast<uint32_t>(value_begin >> 32),
                  static_cast<uint32_t>(a.row_iy_first()[r]) | (runs << 16)};
  }
  return headers;
}

std::vector<uint2> PackRuns(const SymmetricSystemMatrix& a) {
  std::vector<uint2> runs(a.run_offset().size());
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i] = {static_cast<uint32_t>(a.run_offset()[i]),
               static_cast<uint32_t>(a.run_ix_first()[i]) |
                   (static_cast<uint32_t>(a.run_length()[i]) << 16)};
  }
  return runs;
}

StoredViewGeometry StoredGeometry(const SymmetricSystemMatrix& a, int64_t stored) {
  const FanScan& scan = a.scan();
  const FanView& v =
      scan.views()[static_cast<size_t>(a.symmetry().stored_views[static_cast<size_t>(stored)])];
  StoredViewGeometry g;
  g.origin_x = static_cast<float>(scan.left_mm() - v.source.x);
  g.origin_y = static_cast<float>(scan.bottom_mm() - v.source.y);
  g.pixel = static_cast<float>(scan.pixel_x_mm());
  g.to_center_x = static_cast<float>(v.detector_center.x - v.source.x);
  g.to_center_y = static_cast<float>(v.detector_center.y - v.source.y);
  g.u_x = static_cast<float>(v.u.x);
  g.u_y = static_cast<float>(v.u.y);
  g.cylindrical = scan.cylindrical() ? 1 : 0;
  g.radius = static_cast<float>(
      std::hypot(v.detector_center.x - v.source.x, v.detector_center.y - v.source.y));
  g.step = static_cast<float>(std::hypot(v.u.x, v.u.y));
  return g;
}

OrbitBlock OrbitOf(const SymmetricSystemMatrix& a, int64_t block, float step_scale) {
  OrbitBlock orbit{};
  orbit.stored_view = static_cast<int32_t>(block);
  for (const int64_t v : a.BlockViews(block)) SetView(a, v, static_cast<int32_t>(v), orbit);
  FillSlots(orbit);
  orbit.step_scale = step_scale;
  return orbit;
}

absl::Status CheckViews(const std::vector<int64_t>& views, int64_t count) {
  std::vector<char> seen(static_cast<size_t>(count), 0);
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i] < 0 || views[i] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("views[", i, "]: ", views[i], " must be in [0, ", count, ")"));
    }
    if (seen[static_cast<size_t>(views[i])]++) {
      return absl::InvalidArgumentError(
          absl::StrCat("views[", i, "]: view ", views[i], " appears more than once"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OrbitBlock>> GroupViews(const SymmetricSystemMatrix& a,
                                                   const std::vector<int64_t>& views) {
  TOMO_RETURN_IF_ERROR(CheckViews(views, a.scan().num_views()));
  std::vector<int> group_of(static_cast<size_t>(a.num_blocks()), -1);
  std::vector<OrbitBlock> groups;
  for (size_t slot = 0; slot < views.size(); ++slot) {
    const int64_t stored = a.symmetry().views[static_cast<size_t>(views[slot])].stored;
    int& g = group_of[static_cast<size_t>(stored)];
    if (g < 0) {
      g = static_cast<int>(groups.size());
      groups.push_back(OrbitBlock{});
      groups.back().stored_view = static_cast<int32_t>(stored);
    }
    // At most 8 per group: the orbit's views, each once.
    SetView(a, views[slot], static_cast<int32_t>(slot), groups[static_cast<size_t>(g)]);
  }
  for (OrbitBlock& group : groups) FillSlots(group);
  return groups;
}

}  // namespace tomo::core::system_matrix::cuda
