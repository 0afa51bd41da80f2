// Row filtering on a CUDA device (cuda_row_filter.h). Host code, compiled by g++.
#include "core/operators/cuda/cuda_row_filter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cufft.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/parallel_2d_kernels.h"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// Rows filtered per cuFFT batch at most, counted in padded real samples (64 Mi samples:
// 256 MiB real plus 256 MiB complex on the device); larger sinograms go in chunks.
constexpr int64_t kMaxFilterSamplesPerBatch = int64_t{1} << 26;
// cuFFT plans kept per backend; the oldest (lowest key) goes first beyond this.
constexpr size_t kMaxCachedPlans = 8;

}  // namespace

absl::StatusOr<DeviceRowFilter> DeviceRowFilter::Create(const RampFilter& filter, int64_t rows,
                                                         int64_t weight_rows,
                                                         const std::vector<float>& weight,
                                                         cudaStream_t stream) {
  DeviceRowFilter f;
  f.stream_ = stream;
  f.rows_ = rows;
  f.columns_ = filter.num_detectors();
  f.length_ = filter.padded_length();
  const int64_t bins = f.length_ / 2 + 1;
  if (rows < 1 || f.length_ < f.columns_ || f.length_ > (int64_t{1} << 30) ||
      static_cast<int64_t>(filter.response().size()) != bins) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceRowFilter: ", rows, " rows of ",
                                                   f.columns_, " padded to ", f.length_));
  }
  if (weight_rows < 1 || weight_rows > kMaxRowsPerBatch || rows % weight_rows != 0 ||
      (!weight.empty() && static_cast<int64_t>(weight.size()) != weight_rows * f.columns_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceRowFilter: ", rows, " rows in views of ", weight_rows, " rows with ",
        weight.size(), " pixel weights (expected 0 or ", weight_rows * f.columns_, ")"));
  }
  f.weight_rows_ = weight_rows;
  // At most kMaxRowsPerBatch rows (the kernels' grid y) and 2^28 padded samples (1 GiB real
  // plus 1 GiB complex) per batch, a multiple of the weight's rows so that every batch
  // starts at weight row 0.
  int64_t batch = std::min({rows, kMaxRowsPerBatch,
                            std::max<int64_t>(1, (int64_t{1} << 28) / f.length_)});
  if (batch < rows && batch >= f.weight_rows_) batch -= batch % f.weight_rows_;
  if (batch < rows && batch % f.weight_rows_ != 0) {
    return absl::InvalidArgumentError("DeviceRowFilter: weight rows exceed one batch");
  }
  f.batch_ = batch;
  TOMO_ASSIGN_OR_RETURN(f.response_, DeviceBuffer<float>::Allocate(bins, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(f.response_.get(), filter.response().data(),
                                            f.response_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  if (!weight.empty()) {
    TOMO_ASSIGN_OR_RETURN(f.weight_, DeviceBuffer<float>::Allocate(weight.size(), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(f.weight_.get(), weight.data(),
                                              f.weight_.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));
  }
  // real_: the weighted rows with their zero padding (zeroed once here; the weighting
  // kernel writes only the first `columns` of each row, and the out-of-place R2C keeps its
  // input); result_: the C2R output.
  TOMO_ASSIGN_OR_RETURN(f.real_, DeviceBuffer<float>::Allocate(f.batch_ * f.length_, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f.real_.get(), 0, f.real_.size_bytes(), stream));
  TOMO_ASSIGN_OR_RETURN(f.result_, DeviceBuffer<float>::Allocate(f.batch_ * f.length_, stream));
  TOMO_ASSIGN_OR_RETURN(f.spectrum_, DeviceBuffer<float2>::Allocate(f.batch_ * bins, stream));
  const int length = static_cast<int>(f.length_);
  TOMO_ASSIGN_OR_RETURN(f.forward_, FftPlan::Create1d(length, static_cast<int>(f.batch_),
                                                      CUFFT_R2C, stream));
  TOMO_ASSIGN_OR_RETURN(f.inverse_, FftPlan::Create1d(length, static_cast<int>(f.batch_),
                                                      CUFFT_C2R, stream));
  const int64_t tail = rows % f.batch_;
  if (tail > 0) TOMO_RETURN_IF_ERROR(f.TailPlans(tail).status());
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return f;
}

absl::StatusOr<DeviceRowFilter::TailPlan*> DeviceRowFilter::TailPlans(int64_t rows) {
  auto it = tail_plans_.find(rows);
  if (it != tail_plans_.end()) return &it->second;
  const int length = static_cast<int>(length_);
  TailPlan plans;
  TOMO_ASSIGN_OR_RETURN(plans.forward,
                        FftPlan::Create1d(length, static_cast<int>(rows), CUFFT_R2C, stream_));
  TOMO_ASSIGN_OR_RETURN(plans.inverse,
                        FftPlan::Create1d(length, static_cast<int>(rows), CUFFT_C2R, stream_));
  return &tail_plans_.emplace(rows, std::move(plans)).first->second;
}

absl::Status DeviceRowFilter::Apply(const float* d_in, float* d_out,
                                    const float* d_column_weight, int64_t rows) {
  if (rows < 0) rows = rows_;
  if (rows > rows_ || rows % weight_rows_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceRowFilter::Apply: ", rows,
                                                   " rows; at most ", rows_, " in views of ",
                                                   weight_rows_));
  }
  const int64_t bins = length_ / 2 + 1;
  const int32_t columns = static_cast<int32_t>(columns_);
  const int32_t length = static_cast<int32_t>(length_);
  for (int64_t r0 = 0; r0 < rows; r0 += batch_) {
    const int64_t count = std::min(batch_, rows - r0);
    const FftPlan* forward = &forward_;
    const FftPlan* inverse = &inverse_;
    if (count != batch_) {
      TOMO_ASSIGN_OR_RETURN(TailPlan * tail, TailPlans(count));
      forward = &tail->forward;
      inverse = &tail->inverse;
    }
    // Every batch starts at weight row 0 (Create makes batch_ a multiple of weight_rows_).
    TOMO_CUDA_RETURN_IF_ERROR(LaunchWeightPadRows(
        d_in + r0 * columns_, weight_.get(),
        d_column_weight == nullptr ? nullptr : d_column_weight + (r0 / weight_rows_) * columns_,
        static_cast<int32_t>(weight_rows_), count, columns, length, real_.get(), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecR2C(forward->get(), real_.get(),
                                           reinterpret_cast<cufftComplex*>(spectrum_.get())));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchMultiplySpectrum(spectrum_.get(), response_.get(), count,
                                                     static_cast<int32_t>(bins), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecC2R(inverse->get(),
                                           reinterpret_cast<cufftComplex*>(spectrum_.get()),
                                           result_.get()));
    TOMO_CUDA_RETURN_IF_ERROR(
        LaunchUnpadRows(result_.get(), count, columns, length, d_out + r0 * columns_, stream_));
  }
  return absl::OkStatus();
}

absl::Status HostRowFilter::Apply(const RampFilter& filter, Array3D& projections) {
  const int64_t nd = projections.dims().d2;
  if (nd != filter.num_detectors()) {
    return absl::InvalidArgumentError(
        absl::StrCat("projections: ", nd, " detector columns, but the filter was made for ",
                     filter.num_detectors()));
  }
  const int64_t length = filter.padded_length();
  const int64_t bins = length / 2 + 1;
  if (length < nd || static_cast<int64_t>(filter.response().size()) != bins) {
    return absl::InternalError(absl::StrCat("ramp filter with padded length ", length, " and ",
                                            filter.response().size(),
                                            " response values is inconsistent"));
  }
  const int64_t rows = projections.dims().d0 * projections.dims().d1;
  if (rows == 0 || nd == 0) return absl::OkStatus();
  if (length > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("padded filter length ", length, " exceeds 2^30"));
  }

  const cudaStream_t stream = stream_;
  const int64_t batch = std::max<int64_t>(
      1, std::min<int64_t>(rows, kMaxFilterSamplesPerBatch / length));

  TOMO_ASSIGN_OR_RETURN(auto d_response,
                        DeviceBuffer<float>::Allocate(static_cast<size_t>(bins), stream));
  TOMO_ASSIGN_OR_RETURN(auto d_real,
                        DeviceBuffer<float>::Allocate(static_cast<size_t>(batch * length), stream));
  TOMO_ASSIGN_OR_RETURN(auto d_spectrum,
                        DeviceBuffer<float2>::Allocate(static_cast<size_t>(batch * bins), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_response.get(), filter.response().data(),
                                            d_response.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));

  const size_t row_bytes = static_cast<size_t>(nd) * sizeof(float);
  const size_t padded_row_bytes = static_cast<size_t>(length) * sizeof(float);
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t count = std::min(batch, rows - r0);
    TOMO_ASSIGN_OR_RETURN(const RowPlans* plans, GetPlans(length, count));
    float* host = projections.data() + r0 * nd;
    // Zero the padding, then copy the rows in: padded row r is [row r, 0, ..., 0].
    if (length > nd) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(d_real.get() + nd, padded_row_bytes, 0,
                                                  padded_row_bytes - row_bytes,
                                                  static_cast<size_t>(count), stream));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(d_real.get(), padded_row_bytes, host,
                                                row_bytes, row_bytes, static_cast<size_t>(count),
                                                cudaMemcpyHostToDevice, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecR2C(plans->forward.get(), d_real.get(),
                                           reinterpret_cast<cufftComplex*>(d_spectrum.get())));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchMultiplySpectrum(d_spectrum.get(), d_response.get(), count,
                                                     static_cast<int32_t>(bins), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecC2R(plans->inverse.get(),
                                           reinterpret_cast<cufftComplex*>(d_spectrum.get()),
                                           d_real.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(host, row_bytes, d_real.get(), padded_row_bytes,
                                                row_bytes, static_cast<size_t>(count),
                                                cudaMemcpyDeviceToHost, stream));
  }
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::StatusOr<const HostRowFilter::RowPlans*> HostRowFilter::GetPlans(int64_t length,
                                                                  int64_t batch) {
  const std::pair<int64_t, int64_t> key(length, batch);
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  RowPlans plans;
  TOMO_ASSIGN_OR_RETURN(plans.forward,
                        FftPlan::Create1d(static_cast<int>(length), static_cast<int>(batch),
                                          CUFFT_R2C, stream_));
  TOMO_ASSIGN_OR_RETURN(plans.inverse,
                        FftPlan::Create1d(static_cast<int>(length), static_cast<int>(batch),
                                          CUFFT_C2R, stream_));
  if (plans_.size() >= kMaxCachedPlans) {
    // Work queued with the plan to evict must finish before it is destroyed.
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    plans_.erase(plans_.begin());
  }
  it = plans_.emplace(key, std::move(plans)).first;
  return &it->second;
}

}  // namespace tomo::core::cuda
