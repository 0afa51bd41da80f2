// Building the stored rows on the device (device_matrix_build.h). Compiled with
// -fmad=false (core/CMakeLists.txt) so that the float64 polygon arithmetic rounds as the
// CPU build's does.
//
// CountRowsKernel: one thread per stored row (kBlock per block); walks the pixel rows its
// wedge crosses (strip_geometry.h's WedgeInGrid and BandExtent) and writes the counts.
// FillRowsKernel: one warp per stored row (kBlock / 32 per block); the warp takes 32 pixel
// rows at a time, one per lane, scans their lengths with shuffles to place them, and each
// lane writes its run and the weights of its pixels (one polygon clip per pixel). The warp
// reduces the squared weights for the row's norm.
#include "core/system_matrix/cuda/matrix_build_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

using strip_geometry::GridFrame;
using strip_geometry::Polygon;
using strip_geometry::RowWedge;

constexpr int kBlock = 128;

__global__ void __launch_bounds__(kBlock)
    CountRowsKernel(const RowWedge* __restrict__ wedges, int64_t rows, GridFrame frame,
                    int32_t* __restrict__ runs, int32_t* __restrict__ entries,
                    int32_t* __restrict__ iy_first) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const RowWedge w = wedges[row];
  Polygon inside;
  int64_t iy0 = 0, iy1 = 0;
  int64_t count = 0;
  if (strip_geometry::WedgeInGrid(w, frame, &inside, &iy0, &iy1)) {
    for (int64_t iy = iy0; iy < iy1; ++iy) {
      int64_t ix0, ix1;
      strip_geometry::BandExtent(inside, iy, frame, &ix0, &ix1);
      count += ix1 - ix0;
    }
  } else {
    iy0 = iy1 = 0;
  }
  runs[row] = static_cast<int32_t>(iy1 - iy0);
  entries[row] = static_cast<int32_t>(count);
  iy_first[row] = static_cast<int32_t>(iy0);
}

__global__ void __launch_bounds__(kBlock)
    FillRowsKernel(const RowWedge* __restrict__ wedges, int64_t rows, GridFrame frame,
                   StoredRowPointers out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kBlock / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const RowWedge w = wedges[row];
  Polygon inside;
  int64_t iy0 = 0, iy1 = 0;
  double norm2 = 0;
  const int64_t value0 = out.row_value_begin[row];
  const int64_t run0 = out.row_run_begin[row];
  const int64_t share = out.row_value_begin[row + 1] - value0;
  const int64_t run_share = out.row_run_begin[row + 1] - run0;
  bool mismatch = false;
  if (strip_geometry::WedgeInGrid(w, frame, &inside, &iy0, &iy1)) {
    mismatch = iy1 - iy0 != run_share;
    int64_t offset = 0;
    for (int64_t base = iy0; base < iy1; base += 32) {
      const int64_t iy = base + lane;
      int64_t ix0 = 0, ix1 = 0;
      if (iy < iy1) strip_geometry::BandExtent(inside, iy, frame, &ix0, &ix1);
      const int length = static_cast<int>(ix1 - ix0);
      int inclusive = length;
      for (int d = 1; d < 32; d *= 2) {
        const int before = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += before;
      }
      const int64_t start = offset + inclusive - length;
      const int64_t k = iy - iy0;
      if (iy < iy1 && k < run_share && start + length <= share) {
        out.run_offset[run0 + k] = static_cast<int32_t>(start);
        out.run_ix_first[run0 + k] = static_cast<uint16_t>(ix0);
        out.run_length[run0 + k] = static_cast<uint16_t>(length);
        for (int e = 0; e < length; ++e) {
          const float value = strip_geometry::Weight(w, frame, ix0 + e, iy);
          out.values[value0 + start + e] = value;
          norm2 += static_cast<double>(value) * value;
        }
      } else if (iy < iy1) {
        mismatch = true;
      }
      offset += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    if (offset != share) mismatch = true;
  } else if (share != 0 || run_share != 0) {
    mismatch = true;
  }
  for (int d = 16; d > 0; d /= 2) norm2 += __shfl_xor_sync(0xffffffffu, norm2, d);
  if (lane == 0) out.row_norm2[row] = static_cast<float>(norm2);
  if (mismatch) *out.mismatch = 1;
}

}  // namespace

cudaError_t LaunchCountRows(const RowWedge* wedges, int64_t rows, GridFrame frame, int32_t* runs,
                            int32_t* entries, int32_t* iy_first, cudaStream_t stream) {
  CountRowsKernel<<<static_cast<unsigned>((rows + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      wedges, rows, frame, runs, entries, iy_first);
  return cudaGetLastError();
}

cudaError_t LaunchFillRows(const RowWedge* wedges, int64_t rows, GridFrame frame,
                           StoredRowPointers out, cudaStream_t stream) {
  const int64_t rows_per_block = kBlock / 32;
  FillRowsKernel<<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), kBlock, 0,
                   stream>>>(wedges, rows, frame, out);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
