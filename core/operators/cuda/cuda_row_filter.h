// Row filtering on a CUDA device (cuFFT): DeviceRowFilter for projections already on the
// device (the filtered back projection's passes), HostRowFilter for host arrays
// (CudaBackend::FilterRows). Host code, compiled by g++. Not thread-safe; the caller keeps
// the device current for every call and for the destructor.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/operators/cuda/cuda_resources.h"

namespace tomo::core::cuda {

// A ramp filter along the rows of projections already on the device, with optional
// weights applied first (FDK's cosine and column weights, FilteredBackProjectionWeights):
// for FDK from device memory (CudaBackend::FilterAndBackProject, the benchmark's
// GPU-resident FDK total); CudaBackend::FilterRows is the host-array path. Keeps its cuFFT
// plans (one pair per batch size met) and padded buffers (at most kMaxRowsPerBatch rows at
// a time).
//
//   TOMO_ASSIGN_OR_RETURN(auto filter, DeviceRowFilter::Create(filter, rows, rows_per_view,
//                                                               pixel_weight, stream));
//   TOMO_RETURN_IF_ERROR(filter.Apply(d_projections, d_filtered));  // may be in place
class DeviceRowFilter {
 public:
  static constexpr int64_t kMaxRowsPerBatch = 65535;
  // rows: detector rows in all (views x rows_per_view, the most one Apply filters);
  // pixel_weight: empty (none) or rows_per_view x filter.num_detectors() values, row r
  // uses weight row r % rows_per_view.
  static absl::StatusOr<DeviceRowFilter> Create(const RampFilter& filter, int64_t rows,
                                                int64_t rows_per_view,
                                                const std::vector<float>& pixel_weight,
                                                cudaStream_t stream);
  DeviceRowFilter(DeviceRowFilter&&) noexcept = default;
  DeviceRowFilter& operator=(DeviceRowFilter&&) noexcept = default;

  // d_out (rows x columns) = filtered (d_in * pixel weight * column weight); d_out may
  // equal d_in. d_column_weight: null (1) or (rows / rows_per_view) x columns values on
  // the device, one row per view. rows: a multiple of rows_per_view up to Create's rows
  // (-1: Create's rows).
  absl::Status Apply(const float* d_in, float* d_out, const float* d_column_weight = nullptr,
                     int64_t rows = -1);

 private:
  struct TailPlan {
    FftPlan forward, inverse;
  };
  DeviceRowFilter() = default;
  // The plans for a batch of `rows` rows other than batch_, made on first use.
  absl::StatusOr<TailPlan*> TailPlans(int64_t rows);
  cudaStream_t stream_ = nullptr;
  int64_t rows_ = 0, columns_ = 0, length_ = 0, batch_ = 0, weight_rows_ = 1;
  DeviceBuffer<float> response_, weight_, real_, result_;
  DeviceBuffer<float2> spectrum_;
  FftPlan forward_, inverse_;
  std::map<int64_t, TailPlan> tail_plans_;
};

// Ramp filtering of host arrays, in batches of rows through the device: what
// Backend::FilterRows does on a CUDA backend. Keeps its cuFFT plans, one pair per (padded
// length, batch), at most kMaxCachedPlans (the oldest goes first).
//
//   HostRowFilter rows(stream);
//   TOMO_RETURN_IF_ERROR(rows.Apply(filter, projections));   // in place, synchronised
class HostRowFilter {
 public:
  explicit HostRowFilter(cudaStream_t stream) : stream_(stream) {}
  // Filters every row of projections in place (Backend::FilterRows); complete on return.
  absl::Status Apply(const RampFilter& filter, Array3D& projections);
  // Destroys the plans (with the device current).
  void Clear() { plans_.clear(); }

 private:
  struct RowPlans {
    FftPlan forward;  // R2C
    FftPlan inverse;  // C2R
  };
  // The cached plans for `batch` rows of `length` samples; made on first use.
  absl::StatusOr<const RowPlans*> GetPlans(int64_t length, int64_t batch);

  cudaStream_t stream_;
  std::map<std::pair<int64_t, int64_t>, RowPlans> plans_;
};

}  // namespace tomo::core::cuda
