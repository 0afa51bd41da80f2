#include "core/system_matrix/symmetric_system_matrix.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/system_matrix/strip_weights.h"

namespace tomo::core::system_matrix {
namespace {

// Rays of stored view `view` that can meet pixel (qx, qy): the detector columns between
// the lines from the source through the pixel's corners, widened by half a column (a ray
// is one column wide) and a margin of 0.01 column (as the CUDA kernel, whose float32
// coordinates need it; rays outside the true window just find no weight).
void RayWindow(const FanScan& scan, int64_t view, int32_t qx, int32_t qy, int64_t* first,
               int64_t* last) {
  double lo = 1e300, hi = -1e300;
  for (int corner = 0; corner < 4; ++corner) {
    const double x = scan.left_mm() + (qx + (corner & 1)) * scan.pixel_x_mm();
    const double y = scan.bottom_mm() + (qy + (corner >> 1)) * scan.pixel_y_mm();
    const double c = scan.ColumnCoordinate(view, x, y);
    lo = std::min(lo, c);
    hi = std::max(hi, c);
  }
  *first = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(lo - 0.51)));
  *last = std::min<int64_t>(scan.columns() - 1, static_cast<int64_t>(std::floor(hi + 0.51)));
}

}  // namespace

float StoredWeight(const SymmetricSystemMatrix& a, int64_t row, int32_t qx, int32_t qy) {
  const size_t r = static_cast<size_t>(row);
  const int64_t k = qy - a.row_iy_first()[r];
  const int64_t runs = a.row_run_begin()[r + 1] - a.row_run_begin()[r];
  if (k < 0 || k >= runs) return 0.0f;
  const size_t run = static_cast<size_t>(a.row_run_begin()[r] + k);
  const int32_t dx = qx - a.run_ix_first()[run];
  if (dx < 0 || dx >= a.run_length()[run]) return 0.0f;
  return a.values()[static_cast<size_t>(a.row_value_begin()[r] + a.run_offset()[run] + dx)];
}

absl::StatusOr<SymmetryReport> SymmetricSystemMatrix::CheckSymmetric(const FanScan& scan) {
  SymmetryReport report = DetectSquareSymmetry(scan);
  if (!report.eight_fold) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scan lacks the square symmetry of the compressed format: ",
                     report.reason));
  }
  if (scan.nx() >= 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume.size.x: ", scan.nx(), " must be < 65536 for the symmetric stored matrix"));
  }
  return report;
}

absl::StatusOr<SymmetricSystemMatrix> SymmetricSystemMatrix::Build(const FanScan& scan,
                                                                   int threads) {
  TOMO_ASSIGN_OR_RETURN(SymmetryReport report, CheckSymmetric(scan));
  SymmetricSystemMatrix a(scan, std::move(report));
  const StripWeights weights(a.scan_);
  const int64_t columns = scan.columns();
  const int64_t rows = a.num_blocks() * columns;
  auto view_of = [&](int64_t r) { return a.symmetry_.stored_views[static_cast<size_t>(r / columns)]; };
  StoredRows& s = a.rows_;
  s.row_value_begin.assign(static_cast<size_t>(rows) + 1, 0);
  s.row_run_begin.assign(static_cast<size_t>(rows) + 1, 0);
  ParallelFor(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const RowCount count = weights.CountRow(view_of(r), r % columns);
      s.row_value_begin[static_cast<size_t>(r) + 1] = count.entries;
      s.row_run_begin[static_cast<size_t>(r) + 1] = count.runs;
    }
  }, threads);
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
    s.row_value_begin[r + 1] += s.row_value_begin[r];
    s.row_run_begin[r + 1] += s.row_run_begin[r];
  }
  s.row_iy_first.assign(static_cast<size_t>(rows), 0);
  s.row_norm2.assign(static_cast<size_t>(rows), 0.0f);
  s.run_ix_first.resize(static_cast<size_t>(s.row_run_begin.back()));
  s.run_length.resize(s.run_ix_first.size());
  s.run_offset.resize(s.run_ix_first.size());
  s.values.resize(static_cast<size_t>(s.row_value_begin.back()));
  ParallelFor(rows, [&](int64_t r0, int64_t r1) {
    RowRuns row;
    for (int64_t r = r0; r < r1; ++r) {
      weights.ComputeRow(view_of(r), r % columns, &row);
      const size_t run0 = static_cast<size_t>(s.row_run_begin[static_cast<size_t>(r)]);
      const size_t value0 = static_cast<size_t>(s.row_value_begin[static_cast<size_t>(r)]);
      s.row_iy_first[static_cast<size_t>(r)] = row.iy_first;
      for (int64_t k = 0; k < row.runs(); ++k) {
        s.run_ix_first[run0 + k] = static_cast<uint16_t>(row.ix_first[static_cast<size_t>(k)]);
        s.run_length[run0 + k] = static_cast<uint16_t>(row.run_begin[static_cast<size_t>(k) + 1] -
                                                       row.run_begin[static_cast<size_t>(k)]);
        s.run_offset[run0 + k] = row.run_begin[static_cast<size_t>(k)];
      }
      double norm2 = 0;
      for (size_t e = 0; e < row.values.size(); ++e) {
        s.values[value0 + e] = row.values[e];
        norm2 += static_cast<double>(row.values[e]) * row.values[e];
      }
      s.row_norm2[static_cast<size_t>(r)] = static_cast<float>(norm2);
    }
  }, threads);
  a.CountRowsPerPixel(threads);
  return a;
}

absl::StatusOr<SymmetricSystemMatrix> SymmetricSystemMatrix::FromStoredRows(const FanScan& scan,
                                                                            StoredRows rows,
                                                                            int threads) {
  TOMO_ASSIGN_OR_RETURN(SymmetryReport report, CheckSymmetric(scan));
  const size_t expected = report.stored_views.size() * static_cast<size_t>(scan.columns());
  if (rows.row_iy_first.size() != expected || rows.row_value_begin.size() != expected + 1 ||
      rows.row_run_begin.size() != expected + 1 || rows.row_norm2.size() != expected ||
      rows.values.size() != static_cast<size_t>(rows.row_value_begin.back()) ||
      rows.run_offset.size() != static_cast<size_t>(rows.row_run_begin.back()) ||
      rows.run_ix_first.size() != rows.run_offset.size() ||
      rows.run_length.size() != rows.run_offset.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stored rows: arrays of the wrong sizes for ", expected, " stored rows"));
  }
  SymmetricSystemMatrix a(scan, std::move(report));
  a.rows_ = std::move(rows);
  a.CountRowsPerPixel(threads);
  return a;
}

void SymmetricSystemMatrix::CountRowsPerPixel(int threads) {
  // The most rays of a stored view that meet one pixel (ART's step bound).
  const StoredRows& s = rows_;
  const int64_t columns = scan_.columns();
  const int64_t nx = scan_.nx();
  max_rows_per_pixel_.assign(static_cast<size_t>(num_blocks()), 0);
  ParallelFor(num_blocks(), [&](int64_t b0, int64_t b1) {
    std::vector<int32_t> hits(static_cast<size_t>(scan_.nx() * scan_.ny()), 0);
    for (int64_t b = b0; b < b1; ++b) {
      int32_t most = 0;
      for (int pass = 0; pass < 2; ++pass) {  // count, then clear what was counted
        for (int64_t r = b * columns; r < (b + 1) * columns; ++r) {
          const size_t ru = static_cast<size_t>(r);
          for (int64_t run = s.row_run_begin[ru]; run < s.row_run_begin[ru + 1]; ++run) {
            const size_t k = static_cast<size_t>(run);
            const int64_t iy = s.row_iy_first[ru] + (run - s.row_run_begin[ru]);
            const int64_t value0 = s.row_value_begin[ru] + s.run_offset[k];
            for (int64_t e = 0; e < s.run_length[k]; ++e) {
              if (s.values[static_cast<size_t>(value0 + e)] <= 0) continue;
              int32_t& h = hits[static_cast<size_t>(iy * nx + s.run_ix_first[k] + e)];
              if (pass == 0) {
                most = std::max(most, ++h);
              } else {
                h = 0;
              }
            }
          }
        }
      }
      max_rows_per_pixel_[static_cast<size_t>(b)] = most;
    }
  }, threads);
}

int64_t SymmetricSystemMatrix::represented_nonzeros() const {
  int64_t total = 0;
  const int64_t columns = scan_.columns();
  for (int64_t b = 0; b < num_blocks(); ++b) {
    const int64_t stored = rows_.row_value_begin[static_cast<size_t>((b + 1) * columns)] -
                           rows_.row_value_begin[static_cast<size_t>(b * columns)];
    total += stored * static_cast<int64_t>(BlockViews(b).size());
  }
  return total;
}

uint64_t SymmetricSystemMatrix::BytesFor(int64_t views, StoredRowCounts counts) {
  return static_cast<uint64_t>(counts.rows + 1) * 2 * sizeof(int64_t) +        // row starts
         static_cast<uint64_t>(counts.rows) * (sizeof(int32_t) + sizeof(float)) +  // iy, norm
         static_cast<uint64_t>(counts.runs) * (2 * sizeof(uint16_t) + sizeof(int32_t)) +
         static_cast<uint64_t>(counts.nonzeros) * sizeof(float) +
         static_cast<uint64_t>(views) * 2 * sizeof(int32_t);  // per view: stored index, map
}

uint64_t SymmetricSystemMatrix::bytes() const {
  return BytesFor(scan_.num_views(), {stored_rows(), runs(), stored_nonzeros()});
}

void SymmetricSystemMatrix::RestoreRow(int64_t view, int64_t column, std::vector<int32_t>* pixels,
                                       std::vector<float>* weights) const {
  pixels->clear();
  weights->clear();
  const ViewSymmetry& sym = symmetry_.views[static_cast<size_t>(view)];
  const int64_t columns = scan_.columns();
  const int64_t r = sym.stored * columns + (sym.columns_reversed ? columns - 1 - column : column);
  const SquareMap& map = kSquareMaps[static_cast<size_t>(sym.map)];
  const int32_t n = static_cast<int32_t>(scan_.nx());
  for (int64_t run = rows_.row_run_begin[static_cast<size_t>(r)]; run < rows_.row_run_begin[static_cast<size_t>(r) + 1]; ++run) {
    const int32_t iy = rows_.row_iy_first[static_cast<size_t>(r)] + static_cast<int32_t>(run - rows_.row_run_begin[static_cast<size_t>(r)]);
    const int64_t value0 = rows_.row_value_begin[static_cast<size_t>(r)] + rows_.run_offset[static_cast<size_t>(run)];
    for (int32_t e = 0; e < rows_.run_length[static_cast<size_t>(run)]; ++e) {
      int32_t ox, oy;
      MapPixel(map, n, rows_.run_ix_first[static_cast<size_t>(run)] + e, iy, &ox, &oy);
      pixels->push_back(oy * n + ox);
      weights->push_back(rows_.values[static_cast<size_t>(value0 + e)]);
    }
  }
}

CsrSystemMatrix SymmetricSystemMatrix::ExpandToCsr(int threads) const {
  const int64_t views = scan_.num_views(), columns = scan_.columns();
  const int64_t rows = views * columns;
  std::vector<int64_t> offsets(static_cast<size_t>(rows) + 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    const ViewSymmetry& sym = symmetry_.views[static_cast<size_t>(row / columns)];
    const int64_t c = row % columns;
    const int64_t r = sym.stored * columns + (sym.columns_reversed ? columns - 1 - c : c);
    offsets[static_cast<size_t>(row) + 1] =
        offsets[static_cast<size_t>(row)] + rows_.row_value_begin[static_cast<size_t>(r) + 1] - rows_.row_value_begin[static_cast<size_t>(r)];
  }
  std::vector<int32_t> indices(static_cast<size_t>(offsets.back()));
  std::vector<float> weights(static_cast<size_t>(offsets.back()));
  ParallelFor(rows, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> p;
    std::vector<float> w;
    std::vector<std::pair<int32_t, float>> sorted;
    for (int64_t row = r0; row < r1; ++row) {
      RestoreRow(row / columns, row % columns, &p, &w);
      sorted.resize(p.size());
      for (size_t e = 0; e < p.size(); ++e) sorted[e] = {p[e], w[e]};
      std::sort(sorted.begin(), sorted.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      const size_t at = static_cast<size_t>(offsets[static_cast<size_t>(row)]);
      for (size_t e = 0; e < sorted.size(); ++e) {
        indices[at + e] = sorted[e].first;
        weights[at + e] = sorted[e].second;
      }
    }
  }, threads);
  return CsrSystemMatrix(views, columns, scan_.nx(), scan_.ny(), std::move(offsets),
                         std::move(indices), std::move(weights));
}

void SymmetricSystemMatrix::ForwardBlock(int64_t block, const float* x, float* y) const {
  const std::vector<int64_t>& views = BlockViews(block);
  const int64_t columns = scan_.columns();
  const int32_t n = static_cast<int32_t>(scan_.nx());
  ParallelFor(columns, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r = block * columns + c;
      double sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t run = rows_.row_run_begin[static_cast<size_t>(r)]; run < rows_.row_run_begin[static_cast<size_t>(r) + 1]; ++run) {
        const int32_t iy = rows_.row_iy_first[static_cast<size_t>(r)] + static_cast<int32_t>(run - rows_.row_run_begin[static_cast<size_t>(r)]);
        const int64_t value0 = rows_.row_value_begin[static_cast<size_t>(r)] + rows_.run_offset[static_cast<size_t>(run)];
        for (int32_t e = 0; e < rows_.run_length[static_cast<size_t>(run)]; ++e) {
          const double w = rows_.values[static_cast<size_t>(value0 + e)];
          for (size_t k = 0; k < views.size(); ++k) {
            int32_t ox, oy;
            MapPixel(kSquareMaps[static_cast<size_t>(symmetry_.views[static_cast<size_t>(views[k])].map)], n,
                     rows_.run_ix_first[static_cast<size_t>(run)] + e, iy, &ox, &oy);
            sums[k] += w * x[static_cast<int64_t>(oy) * n + ox];
          }
        }
      }
      for (size_t k = 0; k < views.size(); ++k) {
        const bool reversed = symmetry_.views[static_cast<size_t>(views[k])].columns_reversed;
        y[static_cast<int64_t>(k) * columns + (reversed ? columns - 1 - c : c)] =
            static_cast<float>(sums[k]);
      }
    }
  });
}

void SymmetricSystemMatrix::BackBlockGather(int64_t block, const float* z, float* x) const {
  BackViewsAdd(BlockViews(block), z, x);
}

void SymmetricSystemMatrix::BackViewsAdd(const std::vector<int64_t>& views, const float* z,
                                         float* x) const {
  const int64_t columns = scan_.columns();
  const int32_t n = static_cast<int32_t>(scan_.nx());
  ParallelFor(n, [&](int64_t y0, int64_t y1) {
    for (int32_t py = static_cast<int32_t>(y0); py < y1; ++py) {
      for (int32_t px = 0; px < n; ++px) {
        double sum = 0;
        for (size_t k = 0; k < views.size(); ++k) {
          const ViewSymmetry& sym = symmetry_.views[static_cast<size_t>(views[k])];
          const int64_t stored_view = symmetry_.stored_views[static_cast<size_t>(sym.stored)];
          int32_t qx, qy;  // the pixel in the stored view's frame
          MapPixel(kSquareMaps[static_cast<size_t>(InverseSquareMap(sym.map))], n, px, py, &qx, &qy);
          int64_t first, last;
          RayWindow(scan_, stored_view, qx, qy, &first, &last);
          for (int64_t c = first; c <= last; ++c) {
            const float w = StoredWeight(*this, sym.stored * columns + c, qx, qy);
            if (w == 0.0f) continue;
            sum += static_cast<double>(w) *
                   z[static_cast<int64_t>(k) * columns + (sym.columns_reversed ? columns - 1 - c : c)];
          }
        }
        x[static_cast<int64_t>(py) * n + px] += static_cast<float>(sum);
      }
    }
  });
}

void SymmetricSystemMatrix::ForwardViews(const std::vector<int64_t>& views, const float* x,
                                         float* y) const {
  const int64_t columns = scan_.columns();
  const int32_t n = static_cast<int32_t>(scan_.nx());
  const StoredRows& s = rows_;
  ParallelFor(static_cast<int64_t>(views.size()) * columns, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const ViewSymmetry& sym = symmetry_.views[static_cast<size_t>(views[static_cast<size_t>(i / columns)])];
      const int64_t c = i % columns;
      const size_t r = static_cast<size_t>(sym.stored * columns +
                                           (sym.columns_reversed ? columns - 1 - c : c));
      const SquareMap& map = kSquareMaps[static_cast<size_t>(sym.map)];
      double sum = 0;
      ForEachRowEntry(s, r, [&](int32_t ix, int32_t iy, float w) {
        int32_t ox, oy;
        MapPixel(map, n, ix, iy, &ox, &oy);
        sum += static_cast<double>(w) * x[static_cast<int64_t>(oy) * n + ox];
      });
      y[i] = static_cast<float>(sum);
    }
  });
}

void SymmetricSystemMatrix::BackBlockScatter(int64_t block, const float* z, float* x) const {
  const std::vector<int64_t>& views = BlockViews(block);
  const int64_t columns = scan_.columns();
  std::vector<int32_t> pixels;
  std::vector<float> weights;
  for (size_t k = 0; k < views.size(); ++k) {
    for (int64_t c = 0; c < columns; ++c) {
      RestoreRow(views[k], c, &pixels, &weights);
      const float zc = z[static_cast<int64_t>(k) * columns + c];
      for (size_t e = 0; e < pixels.size(); ++e) x[pixels[e]] += weights[e] * zc;
    }
  }
}

void SymmetricSystemMatrix::Multiply(const float* x, float* y) const {
  const int64_t columns = scan_.columns();
  std::vector<float> block_y(8 * static_cast<size_t>(columns));
  for (int64_t b = 0; b < num_blocks(); ++b) {
    ForwardBlock(b, x, block_y.data());
    const std::vector<int64_t>& views = BlockViews(b);
    for (size_t k = 0; k < views.size(); ++k) {
      std::copy(block_y.begin() + static_cast<int64_t>(k) * columns,
                block_y.begin() + static_cast<int64_t>(k + 1) * columns, y + views[k] * columns);
    }
  }
}

void SymmetricSystemMatrix::MultiplyTransposed(const float* y, float* x) const {
  const int64_t columns = scan_.columns();
  std::fill(x, x + scan_.nx() * scan_.ny(), 0.0f);
  std::vector<float> block_z(8 * static_cast<size_t>(columns));
  for (int64_t b = 0; b < num_blocks(); ++b) {
    const std::vector<int64_t>& views = BlockViews(b);
    for (size_t k = 0; k < views.size(); ++k) {
      std::copy(y + views[k] * columns, y + (views[k] + 1) * columns,
                block_z.begin() + static_cast<int64_t>(k) * columns);
    }
    BackBlockGather(b, block_z.data(), x);
  }
}

}  // namespace tomo::core::system_matrix
