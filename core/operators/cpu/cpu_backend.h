// CpuBackend: the reference implementation of Backend (see backend.h for the operators'
// definitions). Plain loops in float32 with float64 where sums are long, split across
// threads by ParallelFor; ramp filtering with FFTW (single precision, plans made per call
// under FFTW's planner lock). What every CI test runs and what CUDA is compared with.
#pragma once

#include <string>

#include "core/operators/backend.h"

namespace tomo::core {

class CpuBackend final : public Backend {
 public:
  // threads <= 0: DefaultThreadCount().
  explicit CpuBackend(int threads = 0);

  std::string name() const override { return "cpu"; }
  // Every model (projector_model.h): cpu_vector_projector.h, cpu_parallel_2d_projector.h,
  // cpu_radon_projector.h.
  absl::StatusOr<std::unique_ptr<Projector>> MakeProjector(const Geometry& geometry,
                                                           const VolumeGeometry& volume_geometry,
                                                           ProjectorModel model) override;
  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override;
  // cpu_radon_operators.h.
  std::unique_ptr<RadonOperators> MakeRadonOperators() override;
  // Host memory, these projectors, this thread count (host_resident_operators.h).
  absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeResidentOperators() override;

 private:
  int threads_;
};

}  // namespace tomo::core
