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
#include "core/operators/cpu/cpu_parallel_2d_projector.h"
#include "core/operators/cpu/cpu_radon_operators.h"
#include "core/operators/cpu/cpu_radon_projector.h"
#include "core/operators/cpu/cpu_vector_projector.h"
#include "core/operators/projector_plan.h"

namespace tomo::core {
namespace {

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

namespace {

// A projector plan (projector_plan.h) run by the CPU reference functions.
class CpuProjector final : public Projector {
 public:
  CpuProjector(ProjectorModel model, ProjectorPlan plan, const VolumeGeometry& volume,
               int threads)
      : model_(model), plan_(std::move(plan)), volume_(volume), threads_(threads) {}

  ProjectorModel model() const override { return model_; }

  absl::Status Forward(const Array3D& volume, Array3D& projections) override {
    struct Visit {
      CpuProjector& p;
      const Array3D& volume;
      Array3D& projections;
      absl::Status operator()(const VectorProjectorPlan& plan) const {
        return CpuVectorForward(plan.geometry, p.volume_, volume, projections, p.threads_);
      }
      absl::Status operator()(const ExactParallel2DProjectorPlan& plan) const {
        return CpuParallel2DForward(plan.geometry, p.volume_, volume, projections, p.threads_);
      }
      absl::Status operator()(const RadonProjectorPlan& plan) const {
        return RadonForwardCpu(plan.geometry, p.volume_, volume, projections, p.threads_);
      }
    };
    return std::visit(Visit{*this, volume, projections}, plan_);
  }

  absl::Status Back(const Array3D& projections, Array3D& volume) override {
    struct Visit {
      CpuProjector& p;
      const Array3D& projections;
      Array3D& volume;
      absl::Status operator()(const VectorProjectorPlan& plan) const {
        return CpuVectorBack(plan.geometry, p.volume_, projections, plan.back_weighting, volume,
                             p.threads_);
      }
      absl::Status operator()(const ExactParallel2DProjectorPlan& plan) const {
        return CpuParallel2DBack(plan.geometry, p.volume_, projections, volume, p.threads_);
      }
      absl::Status operator()(const RadonProjectorPlan& plan) const {
        return RadonBackCpu(plan.geometry, p.volume_, projections, volume, p.threads_);
      }
    };
    return std::visit(Visit{*this, projections, volume}, plan_);
  }

 private:
  const ProjectorModel model_;
  const ProjectorPlan plan_;
  const VolumeGeometry volume_;
  const int threads_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Projector>> CpuBackend::MakeProjector(
    const Geometry& geometry, const VolumeGeometry& volume_geometry, ProjectorModel model) {
  TOMO_ASSIGN_OR_RETURN(ProjectorPlan plan, PlanProjector(geometry, volume_geometry, model));
  return std::unique_ptr<Projector>(
      std::make_unique<CpuProjector>(model, std::move(plan), volume_geometry, threads_));
}

std::unique_ptr<RadonOperators> CpuBackend::MakeRadonOperators() {
  return std::make_unique<CpuRadonOperators>(threads_);
}

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : DefaultThreadCount()) {}

absl::StatusOr<std::unique_ptr<ResidentOperators>> CpuBackend::MakeResidentOperators() {
  return std::unique_ptr<ResidentOperators>(
      std::make_unique<HostResidentOperators>(*this, threads_));
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
