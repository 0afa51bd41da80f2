// DenseSlabs: the stored rows of a SymmetricSystemMatrix re-laid as dense sub-matrices, one
// per warp, for coalesced GPU products that use every stored value for all its symmetric
// rows (cuda/dense_products.cu).
//
// Blocking by views, without sorting: the rows of one stored view are taken 32 adjacent rays
// at a time (a group: neighbouring rays have nearly the same length and cross nearly the
// same pixels), and each row's entries, in order along the ray (by the pixel coordinate the
// group's rays advance in fastest, then the other), are cut into `segments` parts by
// position along that coordinate (bounds that split the group's entries into equal shares,
// the same for all 32 rows, so that the lanes of a step stay side by side across the rays).
// Group g's segment s is one slab (dense_slab.h): 32 lanes x width steps, stored step by
// step (column-major: 32 consecutive values per step), padded with zero weights where a
// lane has fewer entries. Entries of weight 0 in the runs (pixels a wedge only touches) are
// left out.
//
// Round-robin permutation within rows: within its slab, each lane's entries are reordered so
// that at every step the lanes holding a weight touch pixels of different orbits of the
// eight square maps. A transposed product that adds lane l's weight times z into x at the
// pixel's image under each of the block's maps then never has two lanes of one step adding
// to one pixel. The order is made greedily: at each step a lane takes the first of its next
// kLookahead entries (in order along the ray) whose orbit no lower lane took at that step,
// else a padding entry, so rows stay nearly in ray order (the lanes of a step stay close
// together in the image) at the cost of a little more padding.
//
// Bytes: 4 (value) + 2 (pixel offset from the slab's base, dx | dy << 8) per stored entry
// and padding, 32 per slab. A slab spans at most 256 pixels each way (at 2048^2 about 100
// across its 32 rays); Build refuses a matrix whose slabs would not.
// Build cost: one pass over the stored rows, in parallel over groups.
//
//   TOMO_ASSIGN_OR_RETURN(DenseSlabs dense,
//                         DenseSlabs::Build(matrix, DenseSlabs::SegmentsFor(matrix)));
//   for (const DenseSlab& s : dense.ViewSlabs(b)) ...
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/dense_slab.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

class DenseSlabs {
 public:
  static constexpr int kLanes = 32;
  static constexpr int kLookahead = 4;

  // segments >= 1; threads 0: all. INVALID_ARGUMENT when a slab spans more than 256
  // pixels along x or y (fewer segments or a coarser grid would do).
  static absl::StatusOr<DenseSlabs> Build(const SymmetricSystemMatrix& a, int segments,
                                          int threads = 0);
  // Segments that give slabs of about steps_wanted steps (0: kStepsWanted) for the
  // matrix's mean row length, at most kMaxSegments.
  static int SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted = 0);
  static constexpr int kStepsWanted = 24;
  // At most this many (the group's last warp adds a partial per segment and view: at
  // 2048^2 the rows would want 244).
  static constexpr int kMaxSegments = 64;

  int segments() const { return segments_; }
  int32_t n() const { return n_; }
  int32_t columns() const { return columns_; }
  // All slabs, stored view by stored view; stored view b's are [view_begin(b), view_begin(b + 1)):
  // groups in column order, each with its `segments` slabs in segment order.
  const std::vector<DenseSlab>& slabs() const { return slabs_; }
  int64_t view_begin(int64_t stored_view) const {
    return view_begin_[static_cast<size_t>(stored_view)];
  }
  const std::vector<float>& values() const { return values_; }
  // dx | dy << 8 from the slab's base.
  const std::vector<uint16_t>& pixel_offsets() const { return offsets_; }
  // The pixel of slot i of slab `slab` (ix, iy).
  static void Pixel(const DenseSlab& slab, uint16_t offset, int32_t* ix, int32_t* iy) {
    *ix = static_cast<int32_t>(slab.base & 0xffffu) + (offset & 0xff);
    *iy = static_cast<int32_t>(slab.base >> 16) + (offset >> 8);
  }
  // Entries with a weight (the stored nonzeros) and slots (with padding).
  int64_t entries() const { return entries_; }
  int64_t slots() const { return static_cast<int64_t>(values_.size()); }
  uint64_t bytes() const;

  // The orbit of stored pixel (ix, iy) under the eight square maps, as one number (its
  // representative's doubled centred coordinates).
  static uint32_t OrbitKey(int32_t n, int32_t ix, int32_t iy);

 private:
  int segments_ = 1;
  int32_t n_ = 0, columns_ = 0;
  std::vector<DenseSlab> slabs_;
  std::vector<int64_t> view_begin_;
  std::vector<float> values_;
  std::vector<uint16_t> offsets_;
  int64_t entries_ = 0;
};

}  // namespace tomo::core::system_matrix
