#include "core/system_matrix/csr_system_matrix.h"

#include <algorithm>
#include <utility>

#include "core/base/parallel_for.h"
#include "core/system_matrix/strip_weights.h"

namespace tomo::core::system_matrix {

CsrSystemMatrix::CsrSystemMatrix(int64_t views, int64_t columns, int64_t nx, int64_t ny,
                                 std::vector<int64_t> row_offsets,
                                 std::vector<int32_t> column_indices, std::vector<float> values)
    : views_(views), columns_(columns), nx_(nx), ny_(ny), row_offsets_(std::move(row_offsets)),
      column_indices_(std::move(column_indices)), values_(std::move(values)) {}

CsrSystemMatrix CsrSystemMatrix::Build(const FanScan& scan, int threads) {
  const StripWeights weights(scan);
  const int64_t rows = scan.rows();
  const int64_t columns = scan.columns();
  std::vector<int64_t> offsets(static_cast<size_t>(rows) + 1, 0);
  ParallelFor(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      offsets[static_cast<size_t>(r) + 1] = weights.CountRow(r / columns, r % columns).entries;
    }
  }, threads);
  for (int64_t r = 0; r < rows; ++r) offsets[static_cast<size_t>(r) + 1] += offsets[static_cast<size_t>(r)];
  std::vector<int32_t> indices(static_cast<size_t>(offsets.back()));
  std::vector<float> values(static_cast<size_t>(offsets.back()));
  const int64_t nx = scan.nx();
  ParallelFor(rows, [&](int64_t r0, int64_t r1) {
    RowRuns row;
    for (int64_t r = r0; r < r1; ++r) {
      weights.ComputeRow(r / columns, r % columns, &row);
      int64_t at = offsets[static_cast<size_t>(r)];
      for (int64_t k = 0; k < row.runs(); ++k) {
        const int64_t iy = row.iy_first + k;
        for (int32_t e = row.run_begin[k]; e < row.run_begin[k + 1]; ++e, ++at) {
          indices[static_cast<size_t>(at)] =
              static_cast<int32_t>(iy * nx + row.ix_first[k] + (e - row.run_begin[k]));
          values[static_cast<size_t>(at)] = row.values[static_cast<size_t>(e)];
        }
      }
    }
  }, threads);
  return CsrSystemMatrix(scan.num_views(), columns, scan.nx(), scan.ny(), std::move(offsets),
                         std::move(indices), std::move(values));
}

uint64_t CsrSystemMatrix::BytesFor(int64_t rows, int64_t nonzeros) {
  return static_cast<uint64_t>(rows + 1) * sizeof(int64_t) +
         static_cast<uint64_t>(nonzeros) * (sizeof(int32_t) + sizeof(float));
}

uint64_t CsrSystemMatrix::bytes() const { return BytesFor(rows(), nonzeros()); }

void CsrSystemMatrix::Multiply(const float* x, float* y) const {
  ParallelFor(rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      double sum = 0;
      for (int64_t e = row_offsets_[static_cast<size_t>(r)]; e < row_offsets_[static_cast<size_t>(r) + 1]; ++e) {
        sum += static_cast<double>(values_[static_cast<size_t>(e)]) * x[column_indices_[static_cast<size_t>(e)]];
      }
      y[r] = static_cast<float>(sum);
    }
  });
}

void CsrSystemMatrix::MultiplyTransposed(const float* y, float* x) const {
  std::vector<double> sums(static_cast<size_t>(pixels()), 0.0);
  for (int64_t r = 0; r < rows(); ++r) {
    for (int64_t e = row_offsets_[static_cast<size_t>(r)]; e < row_offsets_[static_cast<size_t>(r) + 1]; ++e) {
      sums[static_cast<size_t>(column_indices_[static_cast<size_t>(e)])] +=
          static_cast<double>(values_[static_cast<size_t>(e)]) * y[r];
    }
  }
  for (int64_t j = 0; j < pixels(); ++j) x[j] = static_cast<float>(sums[static_cast<size_t>(j)]);
}

std::vector<float> CsrSystemMatrix::RowNorms2() const {
  std::vector<float> norms(static_cast<size_t>(rows()));
  ParallelFor(rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      double sum = 0;
      for (int64_t e = row_offsets_[static_cast<size_t>(r)]; e < row_offsets_[static_cast<size_t>(r) + 1]; ++e) {
        sum += static_cast<double>(values_[static_cast<size_t>(e)]) * values_[static_cast<size_t>(e)];
      }
      norms[static_cast<size_t>(r)] = static_cast<float>(sum);
    }
  });
  return norms;
}

}  // namespace tomo::core::system_matrix
