// SymmetricSystemMatrix: the 2D fan-beam system matrix stored by its square symmetry.
//
// Only the rows of one view per orbit of the eight square maps are stored (square_symmetry.h;
// 720 views stored as 90 or 91), every other view's rows are restored on the fly by mapping
// pixel indices (MapPixel) and, for reflections, reversing the detector's columns. A stored
// row is kept as runs along pixel rows (strip_weights.h): per pixel row it crosses, the first
// ix and the run's length and offset, then the weights, so that no column index is stored
// per entry. Bytes per entry: 4 (the weight) plus 8 per run (about 2 to 3 entries).
//
// The blocks of block ART are the orbits: block b holds the views of stored view b's orbit
// (up to eight views spread around the circle), in SymmetryReport::orbits order. A block's
// product reads the stored rows once for all its views:
//   ForwardBlock:     y = A_b x, one pass over the stored rows, gathering x at the eight
//                     mapped pixels of every entry;
//   BackBlockGather:  x += A_b^T z pixel by pixel: each output pixel finds, per view, the
//                     window of rays that can meet it (from the geometry) and reads their
//                     weights from the stored runs. Each pixel is written by its owner only:
//                     no atomics and no race, on the CPU's threads and on the GPU alike;
//   BackBlockScatter: the same product entry by entry on one thread (the reference).
// Thread-compatible: const methods may be called concurrently.
//
//   TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix a, SymmetricSystemMatrix::Build(scan));
//   a.ForwardBlock(b, x, y_block);  a.BackBlockGather(b, z_block, x);
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/fan_scan.h"
#include "core/system_matrix/square_symmetry.h"

namespace tomo::core::system_matrix {

// The arrays of the stored rows (host or device alike; see the class comment).
struct StoredRowCounts {
  int64_t rows = 0, runs = 0, nonzeros = 0;
};

class SymmetricSystemMatrix {
 public:
  // FAILED_PRECONDITION with the report's reason when the scan lacks the eight-fold square
  // symmetry; INVALID_ARGUMENT when nx >= 65536 (run starts are 16-bit).
  static absl::StatusOr<SymmetricSystemMatrix> Build(const FanScan& scan, int threads = 0);

  const FanScan& scan() const { return scan_; }
  const SymmetryReport& symmetry() const { return symmetry_; }
  int64_t num_blocks() const { return static_cast<int64_t>(symmetry_.stored_views.size()); }
  const std::vector<int64_t>& BlockViews(int64_t block) const {
    return symmetry_.orbits[static_cast<size_t>(block)];
  }
  int64_t stored_rows() const { return static_cast<int64_t>(row_iy_first_.size()); }
  int64_t stored_nonzeros() const { return static_cast<int64_t>(values_.size()); }
  int64_t runs() const { return static_cast<int64_t>(run_offset_.size()); }
  // Entries of the whole matrix it stands for (the CSR it would expand to).
  int64_t represented_nonzeros() const;
  uint64_t bytes() const;
  static uint64_t BytesFor(int64_t views, StoredRowCounts counts);
  // The most rays of one view that meet one pixel (over the stored views).
  int32_t max_rows_per_pixel(int64_t block) const {
    return max_rows_per_pixel_[static_cast<size_t>(block)];
  }
  float row_norm2(int64_t stored_row) const { return row_norm2_[static_cast<size_t>(stored_row)]; }

  // The arrays (stored row r = stored view * columns + column).
  const std::vector<int64_t>& row_value_begin() const { return row_value_begin_; }  // rows + 1
  const std::vector<int64_t>& row_run_begin() const { return row_run_begin_; }      // rows + 1
  const std::vector<int32_t>& row_iy_first() const { return row_iy_first_; }
  const std::vector<uint16_t>& run_ix_first() const { return run_ix_first_; }
  const std::vector<uint16_t>& run_length() const { return run_length_; }
  const std::vector<int32_t>& run_offset() const { return run_offset_; }  // from the row's start
  const std::vector<float>& values() const { return values_; }
  const std::vector<float>& row_norms2() const { return row_norm2_; }

  // Row (view, column) of the full matrix: pixel indices iy * nx + ix and weights.
  void RestoreRow(int64_t view, int64_t column, std::vector<int32_t>* pixels,
                  std::vector<float>* weights) const;
  CsrSystemMatrix ExpandToCsr(int threads = 0) const;

  // y[k * columns + c] = (A x) at view BlockViews(block)[k], column c.
  void ForwardBlock(int64_t block, const float* x, float* y) const;
  // x += A_b^T z (z laid out as ForwardBlock's y).
  void BackBlockGather(int64_t block, const float* z, float* x) const;
  void BackBlockScatter(int64_t block, const float* z, float* x) const;
  // Whole matrix: y[views * columns] = A x; x[pixels] = A^T y (gather, block by block).
  void Multiply(const float* x, float* y) const;
  void MultiplyTransposed(const float* y, float* x) const;

 private:
  SymmetricSystemMatrix(FanScan scan, SymmetryReport symmetry)
      : scan_(std::move(scan)), symmetry_(std::move(symmetry)) {}
  FanScan scan_;
  SymmetryReport symmetry_;
  std::vector<int64_t> row_value_begin_, row_run_begin_;
  std::vector<int32_t> row_iy_first_;
  std::vector<uint16_t> run_ix_first_, run_length_;
  std::vector<int32_t> run_offset_;
  std::vector<float> values_;
  std::vector<float> row_norm2_;
  std::vector<int32_t> max_rows_per_pixel_;
};

// The weight of stored row `row` at pixel (qx, qy), 0 where the row does not meet it.
float StoredWeight(const SymmetricSystemMatrix& a, int64_t row, int32_t qx, int32_t qy);

}  // namespace tomo::core::system_matrix
