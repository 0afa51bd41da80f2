// CsrSystemMatrix: the whole 2D fan-beam system matrix in compressed sparse row form, the
// plain format every scan can use and the one cuSPARSE takes.
//
// Row view * columns + column holds the strip weights of that ray (strip_weights.h); column
// index iy * nx + ix (the image's row-major order); within a row the entries are in
// increasing column index. Row offsets are int64 (a 2048^2 image seen by 720 x 1024 rays
// has several billion entries); column indices int32 (at most 2^31 pixels).
// Built on the CPU, rows in parallel (a counting pass, then the weights).
//
//   TOMO_ASSIGN_OR_RETURN(FanScan scan, FanScan::Create(geometry, volume));
//   CsrSystemMatrix a = CsrSystemMatrix::Build(scan);
//   a.Multiply(x, y);               // y = A x
//   a.MultiplyTransposed(y, x);     // x = A^T y
#pragma once

#include <cstdint>
#include <vector>

#include "core/system_matrix/fan_scan.h"

namespace tomo::core::system_matrix {

class CsrSystemMatrix {
 public:
  CsrSystemMatrix() = default;
  static CsrSystemMatrix Build(const FanScan& scan, int threads = 0);
  // From arrays (row_offsets.size() == rows + 1); used to expand the symmetric format.
  CsrSystemMatrix(int64_t views, int64_t columns, int64_t nx, int64_t ny,
                  std::vector<int64_t> row_offsets, std::vector<int32_t> column_indices,
                  std::vector<float> values);

  int64_t views() const { return views_; }
  int64_t detector_columns() const { return columns_; }
  int64_t rows() const { return views_ * columns_; }
  int64_t pixels() const { return nx_ * ny_; }
  int64_t nx() const { return nx_; }
  int64_t ny() const { return ny_; }
  int64_t nonzeros() const { return static_cast<int64_t>(values_.size()); }
  const std::vector<int64_t>& row_offsets() const { return row_offsets_; }
  const std::vector<int32_t>& column_indices() const { return column_indices_; }
  const std::vector<float>& values() const { return values_; }
  // Bytes of the three arrays.
  uint64_t bytes() const;
  static uint64_t BytesFor(int64_t rows, int64_t nonzeros);

  // y[rows] = A x[pixels]  (threads over rows)
  void Multiply(const float* x, float* y) const;
  // x[pixels] = A^T y[rows]  (one thread, row by row: the plain scatter)
  void MultiplyTransposed(const float* y, float* x) const;
  // Squared norm of every row.
  std::vector<float> RowNorms2() const;

 private:
  int64_t views_ = 0, columns_ = 0, nx_ = 0, ny_ = 0;
  std::vector<int64_t> row_offsets_;
  std::vector<int32_t> column_indices_;
  std::vector<float> values_;
};

}  // namespace tomo::core::system_matrix
