#include "core/system_matrix/cuda/device_matrix_build.h"

#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/system_matrix/cuda/matrix_build_kernels.h"
#include "core/system_matrix/strip_weights.h"

namespace tomo::core::system_matrix {
namespace {

using core::cuda::DeviceBuffer;
using core::cuda::ScopedDevice;
using core::cuda::Stream;

template <typename T>
absl::Status Download(const DeviceBuffer<T>& from, std::vector<T>* to, cudaStream_t stream) {
  to->resize(from.size());
  if (!to->empty()) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to->data(), from.get(), from.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SymmetricSystemMatrix> BuildSymmetricMatrixOnDevice(const FanScan& scan,
                                                                   int device) {
  TOMO_ASSIGN_OR_RETURN(const SymmetryReport report, SymmetricSystemMatrix::CheckSymmetric(scan));
  const StripWeights weights(scan);
  const int64_t columns = scan.columns();
  const int64_t rows = static_cast<int64_t>(report.stored_views.size()) * columns;
  std::vector<strip_geometry::RowWedge> wedges(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    wedges[static_cast<size_t>(r)] =
        weights.Wedge(report.stored_views[static_cast<size_t>(r / columns)], r % columns);
  }
  const strip_geometry::GridFrame frame = weights.Frame();

  TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device));
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  const cudaStream_t s = stream.get();
  StoredRows out;
  {
    TOMO_ASSIGN_OR_RETURN(auto d_wedges, DeviceBuffer<strip_geometry::RowWedge>::Allocate(wedges.size(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_wedges.get(), wedges.data(), d_wedges.size_bytes(),
                                              cudaMemcpyHostToDevice, s));
    TOMO_ASSIGN_OR_RETURN(auto d_runs, DeviceBuffer<int32_t>::Allocate(static_cast<size_t>(rows), s));
    TOMO_ASSIGN_OR_RETURN(auto d_entries, DeviceBuffer<int32_t>::Allocate(static_cast<size_t>(rows), s));
    TOMO_ASSIGN_OR_RETURN(auto d_iy_first, DeviceBuffer<int32_t>::Allocate(static_cast<size_t>(rows), s));
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchCountRows(d_wedges.get(), rows, frame, d_runs.get(),
                                                    d_entries.get(), d_iy_first.get(), s));
    std::vector<int32_t> runs, entries;
    TOMO_RETURN_IF_ERROR(Download(d_runs, &runs, s));
    TOMO_RETURN_IF_ERROR(Download(d_entries, &entries, s));
    TOMO_RETURN_IF_ERROR(Download(d_iy_first, &out.row_iy_first, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    out.row_value_begin.assign(static_cast<size_t>(rows) + 1, 0);
    out.row_run_begin.assign(static_cast<size_t>(rows) + 1, 0);
    for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
      out.row_value_begin[r + 1] = out.row_value_begin[r] + entries[r];
      out.row_run_begin[r + 1] = out.row_run_begin[r] + runs[r];
    }
    const size_t nonzeros = static_cast<size_t>(out.row_value_begin.back());
    const size_t run_count = static_cast<size_t>(out.row_run_begin.back());
    TOMO_ASSIGN_OR_RETURN(auto d_value_begin, DeviceBuffer<int64_t>::Allocate(out.row_value_begin.size(), s));
    TOMO_ASSIGN_OR_RETURN(auto d_run_begin, DeviceBuffer<int64_t>::Allocate(out.row_run_begin.size(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_value_begin.get(), out.row_value_begin.data(),
                                              d_value_begin.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_run_begin.get(), out.row_run_begin.data(),
                                              d_run_begin.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_ASSIGN_OR_RETURN(auto d_run_offset, DeviceBuffer<int32_t>::Allocate(run_count, s));
    TOMO_ASSIGN_OR_RETURN(auto d_run_ix_first, DeviceBuffer<uint16_t>::Allocate(run_count, s));
    TOMO_ASSIGN_OR_RETURN(auto d_run_length, DeviceBuffer<uint16_t>::Allocate(run_count, s));
    TOMO_ASSIGN_OR_RETURN(auto d_values, DeviceBuffer<float>::Allocate(nonzeros, s));
    TOMO_ASSIGN_OR_RETURN(auto d_norm2, DeviceBuffer<float>::Allocate(static_cast<size_t>(rows), s));
    TOMO_ASSIGN_OR_RETURN(auto d_mismatch, DeviceBuffer<int32_t>::Allocate(1, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_mismatch.get(), 0, sizeof(int32_t), s));
    const cuda::StoredRowPointers pointers{d_value_begin.get(), d_run_begin.get(),
                                           d_run_offset.get(),  d_run_ix_first.get(),
                                           d_run_length.get(),  d_values.get(),
                                           d_norm2.get(),       d_mismatch.get()};
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchFillRows(d_wedges.get(), rows, frame, pointers, s));
    std::vector<int32_t> mismatch;
    TOMO_RETURN_IF_ERROR(Download(d_mismatch, &mismatch, s));
    TOMO_RETURN_IF_ERROR(Download(d_run_offset, &out.run_offset, s));
    TOMO_RETURN_IF_ERROR(Download(d_run_ix_first, &out.run_ix_first, s));
    TOMO_RETURN_IF_ERROR(Download(d_run_length, &out.run_length, s));
    TOMO_RETURN_IF_ERROR(Download(d_values, &out.values, s));
    TOMO_RETURN_IF_ERROR(Download(d_norm2, &out.row_norm2, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    if (mismatch[0] != 0) {
      return absl::InternalError("device build of the stored rows: the filling pass disagrees "
                                 "with the counting pass");
    }
  }  // the buffers are freed on the stream before it goes
  return SymmetricSystemMatrix::FromStoredRows(scan, std::move(out));
}

}  // namespace tomo::core::system_matrix
