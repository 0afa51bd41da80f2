// SegmentedRuns: the symmetric format's stored rows blocked by views into dense column-major
// sub-matrices whose lanes stay side by side, with runs instead of a pixel per entry: one
// layout for both GPU products (cuda/segmented_forward.cu and the orbit transpose).
//
// Sorting-free view-level blocking as DenseSlabs (dense_slabs.h): 32 adjacent rays of a
// stored view form a group; the group marches along x or y (the axis it spans most); the
// march axis is cut into `segments` column ranges by position (bounds that split the
// group's entries into equal shares), the same for the 32 rows, so that the lanes of one
// step stay side by side across the rays; group x segment is a slab. Within a slab a lane's
// entries are ordered by column, then along the other axis; entry t of lane l sits at
// value_base + 32 t + l (one 128-byte line per step), padded with zeros to the slab's
// widest lane. Instead of a pixel per entry the slab keeps, for each of its columns and
// lanes, the lane's run in that column (a wedge meets a column in one range of pixels):
// 4 bytes per column and lane, interleaved the same way, so a lane moving to its next
// column reads its next run with the other lanes. Entries of weight 0 (pixels a wedge
// only touches) are kept, so that runs stay contiguous.
//
// Looking up the weight of row c at stored pixel q (the orbit transpose): the group's
// segment of q's column (segment_of_column), the slab, the run of q's column, the value:
// four dependent loads.
//
// Bytes: 4 per value slot (padding included), 4 per run slot, 48 per slab, one byte per
// column of each group (the segment table), 4 per row norm.
//
//   TOMO_ASSIGN_OR_RETURN(SegmentedRuns r,
//                         SegmentedRuns::Build(matrix, SegmentedRuns::SegmentsFor(matrix)));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/segmented_slab.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

class SegmentedRuns {
 public:
  static constexpr int kLanes = 32;
  static constexpr int kStepsWanted = 24;
  // At most this many (the group's last warp adds a partial per segment and view: at
  // 2048^2 the rows would want 244).
  static constexpr int kMaxSegments = 64;

  // segments in [1, 255]. INVALID_ARGUMENT when a lane has 2048 or more entries in one
  // slab or 32 or more in one column (more segments would do).
  static absl::StatusOr<SegmentedRuns> Build(const SymmetricSystemMatrix& a, int segments,
                                             int threads = 0);
  // Segments that give slabs of about steps_wanted steps (0: kStepsWanted) for the
  // matrix's mean row length, at most kMaxSegments.
  static int SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted = 0);

  int segments() const { return segments_; }
  int32_t n() const { return n_; }
  int32_t groups_per_view() const { return groups_per_view_; }
  const std::vector<float>& values() const { return values_; }
  const std::vector<uint32_t>& runs() const { return runs_; }
  // Slab of group G (stored view * groups_per_view + column / 32), segment s: G * S + s.
  const std::vector<SegmentedSlab>& slabs() const { return slabs_; }
  // segment_of_column[G * n + m]: the segment of group G holding march column m.
  const std::vector<uint8_t>& segment_of_column() const { return segment_of_column_; }
  int64_t view_begin(int64_t stored_view) const {
    return stored_view * groups_per_view_ * segments_;
  }
  int64_t entries() const { return entries_; }
  uint64_t bytes() const;

 private:
  int segments_ = 1;
  int32_t n_ = 0, columns_ = 0, groups_per_view_ = 0;
  std::vector<float> values_;
  std::vector<uint32_t> runs_;
  std::vector<SegmentedSlab> slabs_;
  std::vector<uint8_t> segment_of_column_;
  int64_t entries_ = 0;
};

}  // namespace tomo::core::system_matrix
