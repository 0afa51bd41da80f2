#include "core/system_matrix/view_blocks.h"

#include <algorithm>

#include "core/base/parallel_for.h"

namespace tomo::core::system_matrix {

float SymmetricViewBlocks::RowNorm2(int64_t view, int64_t column) const {
  const ViewSymmetry& sym = a_.symmetry().views[static_cast<size_t>(view)];
  const int64_t columns = a_.scan().columns();
  return a_.row_norm2(sym.stored * columns +
                      (sym.columns_reversed ? columns - 1 - column : column));
}

CsrViewBlocks::CsrViewBlocks(const CsrSystemMatrix& a, int64_t views_per_block)
    : a_(a), norms2_(a.RowNorms2()) {
  const int64_t views = a.views();
  const int64_t count = (views + views_per_block - 1) / views_per_block;
  blocks_.resize(static_cast<size_t>(count));
  for (int64_t v = 0; v < views; ++v) blocks_[static_cast<size_t>(v % count)].push_back(v);
  // The most rows of a block meeting one pixel, counted (then cleared) block by block.
  max_rows_.assign(static_cast<size_t>(count), 0);
  std::vector<int32_t> hits(static_cast<size_t>(a.pixels()), 0);
  const int64_t columns = a.detector_columns();
  for (int64_t b = 0; b < count; ++b) {
    int32_t most = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (const int64_t v : blocks_[static_cast<size_t>(b)]) {
        for (int64_t r = v * columns; r < (v + 1) * columns; ++r) {
          for (int64_t e = a.row_offsets()[static_cast<size_t>(r)]; e < a.row_offsets()[static_cast<size_t>(r) + 1]; ++e) {
            if (a.values()[static_cast<size_t>(e)] <= 0) continue;
            int32_t& h = hits[static_cast<size_t>(a.column_indices()[static_cast<size_t>(e)])];
            if (pass == 0) most = std::max(most, ++h);
            else h = 0;
          }
        }
      }
    }
    max_rows_[static_cast<size_t>(b)] = most;
  }
}

void CsrViewBlocks::ForwardBlock(int64_t block, const float* x, float* y) const {
  const std::vector<int64_t>& views = BlockViews(block);
  const int64_t columns = a_.detector_columns();
  ParallelFor(static_cast<int64_t>(views.size()) * columns, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = views[static_cast<size_t>(i / columns)] * columns + i % columns;
      double sum = 0;
      for (int64_t e = a_.row_offsets()[static_cast<size_t>(r)]; e < a_.row_offsets()[static_cast<size_t>(r) + 1]; ++e) {
        sum += static_cast<double>(a_.values()[static_cast<size_t>(e)]) *
               x[a_.column_indices()[static_cast<size_t>(e)]];
      }
      y[i] = static_cast<float>(sum);
    }
  });
}

void CsrViewBlocks::BackBlockAdd(int64_t block, const float* z, float* x) const {
  const std::vector<int64_t>& views = BlockViews(block);
  const int64_t columns = a_.detector_columns();
  for (size_t k = 0; k < views.size(); ++k) {
    for (int64_t c = 0; c < columns; ++c) {
      const int64_t r = views[k] * columns + c;
      const float zc = z[static_cast<int64_t>(k) * columns + c];
      if (zc == 0.0f) continue;
      for (int64_t e = a_.row_offsets()[static_cast<size_t>(r)]; e < a_.row_offsets()[static_cast<size_t>(r) + 1]; ++e) {
        x[a_.column_indices()[static_cast<size_t>(e)]] += a_.values()[static_cast<size_t>(e)] * zc;
      }
    }
  }
}

}  // namespace tomo::core::system_matrix
