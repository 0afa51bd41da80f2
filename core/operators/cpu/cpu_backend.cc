#include "core/operators/cpu/cpu_backend.h"

#include <fftw3.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/operators/host_resident_operators.h"
#include "core/operators/parallel_2d_joseph.h"

namespace tomo::core {
namespace {

// A view's Joseph parameters (parallel_2d_joseph.h) plus the reciprocal that the gather
// in BackProject solves for detector indices with, instead of dividing per pixel.
// ForwardProject and BackProject call Position() with the same arguments, so their
// interpolation weights are the same numbers and BackProject is A's exact transpose.
struct JosephView : JosephViewParameters {
  double detectors_per_position = 0;
};

inline double Position(const JosephView& view, int64_t k, int64_t line) {
  return view.per_detector * static_cast<double>(k) +
         (view.per_line * static_cast<double>(line) + view.offset);
}

// Weight of pixel `pixel` in the interpolation at `position`: the linear-interpolation
// "hat", 1 - frac for floor(position) and frac for the next pixel. Both directions call
// this with the same arguments, so A and A^T hold bitwise the same weights.
inline double InterpolationWeight(double position, int64_t pixel) {
  return 1.0 - std::abs(position - static_cast<double>(pixel));
}

// floor() for the small values Joseph's loops convert (positions within the image,
// detector indices clamped to the detector), without the libm call that baseline x86-64
// makes of std::floor. Equal to std::floor for every such value.
inline int64_t FloorToInt(double value) {
  const int64_t truncated = static_cast<int64_t>(value);
  return value < static_cast<double>(truncated) ? truncated - 1 : truncated;
}

std::vector<JosephView> MakeCpuJosephViews(const ParallelGeometry2D& geometry,
                                           const VolumeGeometry& volume) {
  std::vector<JosephView> views;
  for (const JosephViewParameters& parameters : MakeJosephViews(geometry, volume)) {
    views.push_back(JosephView{parameters, 1.0 / parameters.per_detector});
  }
  return views;
}

// FFTW's planner (and plan destruction) keeps global state and is not thread-safe; every
// job in the process that plans goes through this one lock. Executing a plan on new
// arrays is thread-safe.
std::mutex& FftwPlannerMutex() {
  static std::mutex mutex;
  return mutex;
}

struct FftwFree {
  void operator()(void* pointer) const { fftwf_free(pointer); }
};
using FftwRealBuffer = std::unique_ptr<float[], FftwFree>;
using FftwComplexBuffer = std::unique_ptr<fftwf_complex[], FftwFree>;

class FftwPlan {
 public:
  explicit FftwPlan(fftwf_plan plan) : plan_(plan) {}
  FftwPlan(FftwPlan&& other) noexcept : plan_(std::exchange(other.plan_, nullptr)) {}
  FftwPlan& operator=(FftwPlan&&) = delete;
  FftwPlan(const FftwPlan&) = delete;
  FftwPlan& operator=(const FftwPlan&) = delete;
  ~FftwPlan() {
    if (plan_ == nullptr) return;
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    fftwf_destroy_plan(plan_);
  }
  fftwf_plan get() const { return plan_; }

 private:
  fftwf_plan plan_;
};

}  // namespace

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : DefaultThreadCount()) {}

absl::StatusOr<std::unique_ptr<ResidentOperators>> CpuBackend::MakeResidentOperators() {
  return std::unique_ptr<ResidentOperators>(
      std::make_unique<HostResidentOperators>(*this, threads_));
}

absl::Status CpuBackend::ForwardProject(const ParallelGeometry2D& geometry,
                                        const VolumeGeometry& volume_geometry,
                                        const Array3D& volume, Array3D& projections) {
  TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  const std::vector<JosephView> views = MakeCpuJosephViews(geometry, volume_geometry);
  const int64_t nx = volume_geometry.size().x;
  const int64_t ny = volume_geometry.size().y;
  const int64_t num_detectors = geometry.num_detectors();
  const float* image = volume.data();
  float* output = projections.data();

  ParallelFor(
      geometry.num_views(),
      [&](int64_t view_begin, int64_t view_end) {
        for (int64_t v = view_begin; v < view_end; ++v) {
          const JosephView& view = views[static_cast<size_t>(v)];
          const int64_t num_lines = view.step_rows ? ny : nx;
          const int64_t num_along = view.step_rows ? nx : ny;
          // Pixel (line, i) lies at image[line * line_stride + i * along_stride].
          const int64_t line_stride = view.step_rows ? nx : 1;
          const int64_t along_stride = view.step_rows ? 1 : nx;
          for (int64_t k = 0; k < num_detectors; ++k) {
            double sum = 0;
            for (int64_t line = 0; line < num_lines; ++line) {
              const double position = Position(view, k, line);
              // Both neighbours outside the image: nothing to add (and no overflow below).
              if (!(position > -1.0 && position < static_cast<double>(num_along))) continue;
              const int64_t i0 = FloorToInt(position);
              const float* row = image + line * line_stride;
              if (i0 >= 0) sum += InterpolationWeight(position, i0) * row[i0 * along_stride];
              if (i0 + 1 < num_along) {
                sum += InterpolationWeight(position, i0 + 1) * row[(i0 + 1) * along_stride];
              }
            }
            output[v * num_detectors + k] = static_cast<float>(sum * view.path_length);
          }
        }
      },
      threads_);
  return absl::OkStatus();
}

absl::Status CpuBackend::BackProject(const ParallelGeometry2D& geometry,
                                     const VolumeGeometry& volume_geometry,
                                     const Array3D& projections, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  const std::vector<JosephView> views = MakeCpuJosephViews(geometry, volume_geometry);
  const int64_t nx = volume_geometry.size().x;
  const int64_t ny = volume_geometry.size().y;
  const int64_t num_detectors = geometry.num_detectors();
  const float* input = projections.data();
  float* image = volume.data();

  // The forward pass reads pixel `along` of line `line` from ray k when floor(position) is
  // `along` or `along - 1`: position in [along - 1, along + 1), where the weight is the
  // hat InterpolationWeight(position, along). position is affine in k, so those k form a
  // range, found by solving for k. Rounding can only drop a k at the range's ends, whose
  // weight there is zero to within rounding.
  auto gather = [num_detectors](const JosephView& view, const float* row, int64_t line,
                                int64_t along) {
    const double at_line = view.per_line * static_cast<double>(line) + view.offset;
    const double k_a = (static_cast<double>(along - 1) - at_line) * view.detectors_per_position;
    const double k_b = (static_cast<double>(along + 1) - at_line) * view.detectors_per_position;
    // Clamped to the detector before converting, so that far-off rays cannot overflow.
    const double last = static_cast<double>(num_detectors - 1);
    const int64_t k_first = -FloorToInt(-std::clamp(std::min(k_a, k_b), 0.0, last + 1.0));
    const int64_t k_last = FloorToInt(std::clamp(std::max(k_a, k_b), -1.0, last));
    double sum = 0;
    for (int64_t k = k_first; k <= k_last; ++k) {
      // max(0, .): a k at the range's very end may sit a rounding error outside it.
      sum += std::max(0.0, InterpolationWeight(Position(view, k, line), along)) * row[k];
    }
    return sum * view.path_length;
  };

  ParallelFor(
      ny,
      [&](int64_t y_begin, int64_t y_end) {
        // One image row at a time, all views, the inner loop along the row: the view's
        // projection row stays in cache while the row's pixels read it. Each pixel still
        // sums its views in view order, so results do not depend on the thread count.
        std::vector<double> row_sums(static_cast<size_t>(nx));
        for (int64_t iy = y_begin; iy < y_end; ++iy) {
          std::fill(row_sums.begin(), row_sums.end(), 0.0);
          for (size_t v = 0; v < views.size(); ++v) {
            const JosephView& view = views[v];
            const float* row = input + static_cast<int64_t>(v) * num_detectors;
            if (view.step_rows) {
              for (int64_t ix = 0; ix < nx; ++ix) {
                row_sums[static_cast<size_t>(ix)] += gather(view, row, iy, ix);
              }
            } else {
              for (int64_t ix = 0; ix < nx; ++ix) {
                row_sums[static_cast<size_t>(ix)] += gather(view, row, ix, iy);
              }
            }
          }
          for (int64_t ix = 0; ix < nx; ++ix) {
            image[iy * nx + ix] = static_cast<float>(row_sums[static_cast<size_t>(ix)]);
          }
        }
      },
      threads_);
  return absl::OkStatus();
}

absl::Status CpuBackend::FilterRows(const RampFilter& filter, Array3D& projections) {
  const Dims3 dims = projections.dims();
  if (dims.d2 != filter.num_detectors()) {
    return absl::InvalidArgumentError(
        absl::StrCat("projections: ", dims.d2, " detector columns, but the filter was made for ",
                     filter.num_detectors()));
  }
  const int64_t length = filter.padded_length();
  const int64_t num_frequencies = length / 2 + 1;
  const std::vector<float>& response = filter.response();
  if (static_cast<int64_t>(response.size()) != num_frequencies) {
    return absl::InternalError(absl::StrCat("ramp filter response has ", response.size(),
                                            " values, expected ", num_frequencies));
  }
  const int64_t num_rows = dims.d0 * dims.d1;
  if (num_rows == 0) return absl::OkStatus();

  // Plans are made once per call on buffers from fftwf_malloc; every thread's buffers come
  // from fftwf_malloc too, so they share the alignment the plans assume.
  std::unique_ptr<FftwPlan> forward, inverse;
  {
    FftwRealBuffer real(fftwf_alloc_real(static_cast<size_t>(length)));
    FftwComplexBuffer spectrum(fftwf_alloc_complex(static_cast<size_t>(num_frequencies)));
    if (real == nullptr || spectrum == nullptr) {
      return absl::ResourceExhaustedError("ramp filter: cannot allocate FFT buffers");
    }
    std::lock_guard<std::mutex> lock(FftwPlannerMutex());
    const int n = static_cast<int>(length);
    forward = std::make_unique<FftwPlan>(
        fftwf_plan_dft_r2c_1d(n, real.get(), spectrum.get(), FFTW_ESTIMATE));
    inverse = std::make_unique<FftwPlan>(
        fftwf_plan_dft_c2r_1d(n, spectrum.get(), real.get(), FFTW_ESTIMATE));
  }
  if (forward->get() == nullptr || inverse->get() == nullptr) {
    return absl::InternalError(absl::StrCat("FFTW could not plan length ", length));
  }

  const int64_t n = dims.d2;
  float* data = projections.data();
  std::atomic<bool> allocation_failed{false};
  ParallelFor(
      num_rows,
      [&](int64_t row_begin, int64_t row_end) {
        FftwRealBuffer real(fftwf_alloc_real(static_cast<size_t>(length)));
        FftwComplexBuffer spectrum(fftwf_alloc_complex(static_cast<size_t>(num_frequencies)));
        if (real == nullptr || spectrum == nullptr) {
          allocation_failed = true;
          return;
        }
        for (int64_t r = row_begin; r < row_end; ++r) {
          float* row = data + r * n;
          std::copy(row, row + n, real.get());
          std::fill(real.get() + n, real.get() + length, 0.0f);
          fftwf_execute_dft_r2c(forward->get(), real.get(), spectrum.get());
          for (int64_t f = 0; f < num_frequencies; ++f) {
            spectrum[f][0] *= response[static_cast<size_t>(f)];
            spectrum[f][1] *= response[static_cast<size_t>(f)];
          }
          fftwf_execute_dft_c2r(inverse->get(), spectrum.get(), real.get());
          std::copy(real.get(), real.get() + n, row);
        }
      },
      threads_);
  if (allocation_failed) {
    return absl::ResourceExhaustedError("ramp filter: cannot allocate FFT buffers");
  }
  return absl::OkStatus();
}

}  // namespace tomo::core
