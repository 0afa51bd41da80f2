// SymmetricSystemMatrix: the 2D fan-beam system matrix stored by its square symmetry.
//
// Only the rows of one view per orbit of the eight square maps are stored (square_symmetry.h;
// 720 views stored as 90 or 91), every other view's rows are restored on the fly by mapping
// pixel indices (MapPixel) and, for reflections, reversing the detector's columns. A stored
// row is kept as runs along pixel rows (strip_weights.h): per pixel row it crosses, the first
// ix and the run's length and offset, then the weights, so that no column index is stored
// per entry. Bytes per entry: 4 (the weight) plus 8 per run (a run holds about the ray's
// width in pixels plus one entries: more on finer grids).
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
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/fan_scan.h"
#include "core/system_matrix/square_symmetry.h"
#include "core/system_matrix/tiled_layout_cache.h"

namespace tomo::core::system_matrix {

struct StoredRowCounts {
  int64_t rows = 0, runs = 0, nonzeros = 0;
};

// The arrays of the stored rows (stored row r = stored view * columns + column), as
// SymmetricSystemMatrix keeps them; filled by its CPU build or by the CUDA build
// (cuda/device_matrix_build.h).
struct StoredRows {
  std::vector<int64_t> row_value_begin, row_run_begin;  // rows + 1 each
  std::vector<int32_t> row_iy_first;
  std::vector<uint16_t> run_ix_first, run_length;
  std::vector<int32_t> run_offset;  // from the row's first value
  std::vector<float> values;
  std::vector<float> row_norm2;
};

// Calls f(ix, iy, value) for every entry of stored row r (view * columns + column), run by
// run: the one walk over the runs format that the layouts built from it share.
template <typename F>
void ForEachRowEntry(const StoredRows& s, size_t r, F&& f) {
  for (int64_t run = s.row_run_begin[r]; run < s.row_run_begin[r + 1]; ++run) {
    const size_t k = static_cast<size_t>(run);
    const int32_t iy = s.row_iy_first[r] + static_cast<int32_t>(run - s.row_run_begin[r]);
    const int64_t value0 = s.row_value_begin[r] + s.run_offset[k];
    for (int32_t e = 0; e < s.run_length[k]; ++e) {
      f(static_cast<int32_t>(s.run_ix_first[k] + e), iy,
        s.values[static_cast<size_t>(value0 + e)]);
    }
  }
}

class SymmetricSystemMatrix {
 public:
  // FAILED_PRECONDITION with the report's reason when the scan lacks the eight-fold square
  // symmetry; INVALID_ARGUMENT when nx >= 65536 (run starts are 16-bit).
  static absl::StatusOr<SymmetricSystemMatrix> Build(const FanScan& scan, int threads = 0);
  // The same from rows computed elsewhere (the CUDA build): checks as Build, then takes the
  // rows of the stored views (report.stored_views order) as they are.
  static absl::StatusOr<SymmetricSystemMatrix> FromStoredRows(const FanScan& scan,
                                                              StoredRows rows, int threads = 0);
  // The symmetry check of Build alone (FAILED_PRECONDITION / INVALID_ARGUMENT as Build).
  static absl::StatusOr<SymmetryReport> CheckSymmetric(const FanScan& scan);

  const FanScan& scan() const { return scan_; }
  const SymmetryReport& symmetry() const { return symmetry_; }
  int64_t num_blocks() const { return static_cast<int64_t>(symmetry_.stored_views.size()); }
  const std::vector<int64_t>& BlockViews(int64_t block) const {
    return symmetry_.orbits[static_cast<size_t>(block)];
  }
  int64_t stored_rows() const { return static_cast<int64_t>(rows_.row_iy_first.size()); }
  int64_t stored_nonzeros() const { return static_cast<int64_t>(rows_.values.size()); }
  int64_t runs() const { return static_cast<int64_t>(rows_.run_offset.size()); }
  // Entries of the whole matrix it stands for (the CSR it would expand to).
  int64_t represented_nonzeros() const;
  uint64_t bytes() const;
  static uint64_t BytesFor(int64_t views, StoredRowCounts counts);
  // The most rays of one view that meet one pixel (over the stored views).
  int32_t max_rows_per_pixel(int64_t block) const {
    return max_rows_per_pixel_[static_cast<size_t>(block)];
  }
  float row_norm2(int64_t stored_row) const {
    return rows_.row_norm2[static_cast<size_t>(stored_row)];
  }

  // The tiled layout of this matrix for tile_side (tiled_runs.h; the GPU's tiled kernels;
  // <= 0: TiledRuns::TileSideFor its grid), built on the first call for that side and kept
  // with the matrix and its copies: every later call, and every later upload of the matrix,
  // shares it (tiled_layout_cache.h). Thread-safe; TiledRuns::Build's errors.
  absl::StatusOr<std::shared_ptr<const TiledRuns>> TiledLayout(int tile_side = 0) const {
    return tiled_layouts_->Get(*this, tile_side);
  }
  // Bytes of the tiled layouts it keeps, on top of bytes().
  uint64_t tiled_layout_bytes() const { return tiled_layouts_->bytes(); }
  // Lets go of the kept layouts (for this matrix and its copies; holders of one keep it):
  // memory over use, the next TiledLayout builds again.
  void ForgetTiledLayouts() const { tiled_layouts_->Forget(); }

  // The arrays (stored row r = stored view * columns + column).
  const StoredRows& rows() const { return rows_; }
  const std::vector<int64_t>& row_value_begin() const { return rows_.row_value_begin; }
  const std::vector<int64_t>& row_run_begin() const { return rows_.row_run_begin; }
  const std::vector<int32_t>& row_iy_first() const { return rows_.row_iy_first; }
  const std::vector<uint16_t>& run_ix_first() const { return rows_.run_ix_first; }
  const std::vector<uint16_t>& run_length() const { return rows_.run_length; }
  const std::vector<int32_t>& run_offset() const { return rows_.run_offset; }
  const std::vector<float>& values() const { return rows_.values; }
  const std::vector<float>& row_norms2() const { return rows_.row_norm2; }

  // Row (view, column) of the full matrix: pixel indices iy * nx + ix and weights.
  void RestoreRow(int64_t view, int64_t column, std::vector<int32_t>* pixels,
                  std::vector<float>* weights) const;
  CsrSystemMatrix ExpandToCsr(int threads = 0) const;

  // y[k * columns + c] = (A x) at view BlockViews(block)[k], column c.
  void ForwardBlock(int64_t block, const float* x, float* y) const;
  // x += A_b^T z (z laid out as ForwardBlock's y).
  void BackBlockGather(int64_t block, const float* z, float* x) const;
  void BackBlockScatter(int64_t block, const float* z, float* x) const;
  // Any views, in any order (the rows of a projector's block of views, for SIRT, SART,
  // OS-SART or CGLS on the stored matrix): y[k * columns + c] = (A x) at views[k], column c
  // (each view's rows read on their own); x += A^T z over those rows (pixel-owned gather,
  // as BackBlockGather, which is this for the block's views).
  void ForwardViews(const std::vector<int64_t>& views, const float* x, float* y) const;
  void BackViewsAdd(const std::vector<int64_t>& views, const float* z, float* x) const;
  // Whole matrix: y[views * columns] = A x; x[pixels] = A^T y (gather, block by block).
  void Multiply(const float* x, float* y) const;
  void MultiplyTransposed(const float* y, float* x) const;

 private:
  SymmetricSystemMatrix(FanScan scan, SymmetryReport symmetry)
      : scan_(std::move(scan)), symmetry_(std::move(symmetry)) {}
  FanScan scan_;
  void CountRowsPerPixel(int threads);
  SymmetryReport symmetry_;
  StoredRows rows_;
  std::vector<int32_t> max_rows_per_pixel_;
  // Derived from the rows, which never change after the build: copies share it.
  std::shared_ptr<TiledLayoutCache> tiled_layouts_ = std::make_shared<TiledLayoutCache>();
};

// The weight of stored row `row` at pixel (qx, qy), 0 where the row does not meet it.
float StoredWeight(const SymmetricSystemMatrix& a, int64_t row, int32_t qx, int32_t qy);

}  // namespace tomo::core::system_matrix
