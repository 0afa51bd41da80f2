// InterleavedRuns: the symmetric format's stored rows blocked by views into dense
// column-major sub-matrices, one layout for both GPU products (cuda/interleaved_forward.cu
// and the orbit transpose, cuda/symmetric_back_orbit.cu).
//
// Sorting-free view-level blocking: the rows of one stored view are taken 32 adjacent rays
// at a time (a group: neighbouring rays are nearly equally long and run side by side), and
// the group's values are stored entry by entry for the 32 rows together: entry e of row
// first_row + l at value_base + 32 e + l, each row padded with zeros to the group's longest.
// Its runs (SymmetricSystemMatrix's: one per pixel row the ray crosses, the index of its
// first entry in the row, ix_first and length) are interleaved the same way. So when the 32
// lanes of a warp walk their rows' entries in step, each step reads one line of values, and
// a lane's run (where its pixel is) only when it moves to the next pixel row; no pixel index
// is stored per entry. For parallelism a group's steps are cut into `segments` equal
// ranges, one warp (InterleavedSlab) each, with the run each lane starts in.
//
// The row headers pack (for the orbit transpose's look-ups, as cuda::PackRowHeaders but
// with stride 32): x = the row's first run slot, y | z << 32 = its first value slot,
// w = iy_first | runs << 16.
//
// Bytes: 4 per value slot, 8 per run slot (padding included: about 5 % over the runs format
// at 512^2), 16 per row header, 4 per row norm, 40 per slab and 2 per lane and slab.
//
//   InterleavedRuns r = InterleavedRuns::Build(matrix, InterleavedRuns::SegmentsFor(matrix));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/interleaved_slab.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

class InterleavedRuns {
 public:
  static constexpr int kLanes = 32;
  static constexpr int kStepsWanted = 24;
  // At most this many (the group's last warp adds a partial per segment and view: at
  // 2048^2 the rows would want 244).
  static constexpr int kMaxSegments = 64;

  // INVALID_ARGUMENT when the run slots exceed 32-bit offsets. segments >= 1.
  static absl::StatusOr<InterleavedRuns> Build(const SymmetricSystemMatrix& a, int segments,
                                               int threads = 0);
  // Segments that give slabs of about steps_wanted steps (0: kStepsWanted) for the
  // matrix's mean row length, at most kMaxSegments.
  static int SegmentsFor(const SymmetricSystemMatrix& a, int steps_wanted = 0);

  int segments() const { return segments_; }
  const std::vector<float>& values() const { return values_; }
  const std::vector<RunSlot>& runs() const { return runs_; }
  const std::vector<RowHeader>& row_headers() const { return headers_; }
  const std::vector<InterleavedSlab>& slabs() const { return slabs_; }
  const std::vector<uint16_t>& cursors() const { return cursors_; }
  // Stored view b's slabs are [view_begin(b), view_begin(b + 1)).
  int64_t view_begin(int64_t stored_view) const {
    return view_begin_[static_cast<size_t>(stored_view)];
  }
  uint64_t bytes() const;

 private:
  int segments_ = 1;
  std::vector<float> values_;
  std::vector<RunSlot> runs_;
  std::vector<RowHeader> headers_;
  std::vector<InterleavedSlab> slabs_;
  std::vector<uint16_t> cursors_;
  std::vector<int64_t> view_begin_;
};

}  // namespace tomo::core::system_matrix
